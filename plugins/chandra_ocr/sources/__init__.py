"""Sources: where PDFs come from (a local folder or glob, an object store), what discovery saw of
them (the entries table), and discovery itself."""
