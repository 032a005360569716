; Call sites by name (@callee): functions and selector calls (pkg.F, value.Method).
(call_expression function: (identifier) @callee)
(call_expression function: (selector_expression field: (field_identifier) @callee))
(call_expression function: (parenthesized_expression (identifier) @callee))
