; Imported modules (@source); for `from m import n`, @name is n, which may itself be a module.
(import_statement name: (dotted_name) @source)
(import_statement name: (aliased_import name: (dotted_name) @source))
(import_from_statement module_name: (_) @source name: (dotted_name) @name)
(import_from_statement module_name: (_) @source name: (aliased_import name: (dotted_name) @name))
(import_from_statement module_name: (_) @source (wildcard_import))
