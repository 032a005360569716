; Inheritance: @type extends @extends / implements @implements.
(class_declaration
  name: (_) @type
  (class_heritage (extends_clause value: (_) @extends)))
(abstract_class_declaration
  name: (_) @type
  (class_heritage (extends_clause value: (_) @extends)))
(class_declaration
  name: (_) @type
  (class_heritage (implements_clause (_) @implements)))
(abstract_class_declaration
  name: (_) @type
  (class_heritage (implements_clause (_) @implements)))
(interface_declaration
  name: (_) @type
  (extends_type_clause (_) @extends))
