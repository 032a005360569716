; Call sites by name (@callee): functions, paths, methods and macros.
(call_expression function: (identifier) @callee)
(call_expression function: (scoped_identifier name: (identifier) @callee))
(call_expression function: (field_expression field: (field_identifier) @callee))
(call_expression function: (generic_function function: (identifier) @callee))
(call_expression function: (generic_function function: (scoped_identifier name: (identifier) @callee)))
(call_expression function: (generic_function function: (field_expression field: (field_identifier) @callee)))
(macro_invocation macro: (identifier) @callee)
