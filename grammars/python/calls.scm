; Call sites by name (@callee): plain calls and attribute calls.
(call function: (identifier) @callee)
(call function: (attribute attribute: (identifier) @callee))
