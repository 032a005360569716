; Definitions in Python (see typescript/definitions.scm for the conventions). A function inside a
; class becomes a method; decorators belong to the definition they decorate.

(function_definition name: (identifier) @name) @definition.function
(class_definition name: (identifier) @name) @definition.class
(decorated_definition
  definition: [
    (function_definition name: (identifier) @name)
    (class_definition name: (identifier) @name)
  ]) @definition.wrapped
