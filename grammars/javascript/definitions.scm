; Definitions in JavaScript and JSX (see typescript/definitions.scm for the conventions).

(function_declaration name: (identifier) @name) @definition.function
(generator_function_declaration name: (identifier) @name) @definition.function
(class_declaration name: (identifier) @name) @definition.class
(method_definition name: (_) @name) @definition.method

(lexical_declaration
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function) (function_expression) (generator_function)])) @definition.function
(variable_declaration
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function) (function_expression) (generator_function)])) @definition.function
(field_definition
  property: (_) @name
  value: [(arrow_function) (function_expression)]) @definition.method

(export_statement
  declaration: [
    (function_declaration name: (identifier) @name)
    (generator_function_declaration name: (identifier) @name)
    (class_declaration name: (identifier) @name)
    (lexical_declaration
      (variable_declarator
        name: (identifier) @name
        value: [(arrow_function) (function_expression) (generator_function)]))
  ]) @definition.wrapped
