; Module specifiers this file depends on (@source is the specifier text without quotes).
(import_statement source: (string (string_fragment) @source))
(export_statement source: (string (string_fragment) @source))
(call_expression
  function: (identifier) @_require
  arguments: (arguments . (string (string_fragment) @source))
  (#eq? @_require "require"))
(call_expression
  function: (import)
  arguments: (arguments . (string (string_fragment) @source)))
