"""PDF stages: discovery, compression, triage (route per page) and rendering."""
