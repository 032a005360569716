; Imported package paths (@source; the quotes are stripped).
(import_spec path: (_) @source)
