"""Tables: the table model and its markup, and the readers of tables in a PDF's text layer."""
