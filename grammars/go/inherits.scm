; Embedding: a struct or interface @type embeds @extends.
(type_spec
  name: (type_identifier) @type
  type: (struct_type (field_declaration_list (field_declaration !name type: (_) @extends))))
(type_spec
  name: (type_identifier) @type
  type: (interface_type (type_elem (_) @extends)))
