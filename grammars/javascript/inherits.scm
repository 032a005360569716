; Inheritance: @type extends @extends.
(class_declaration name: (_) @type (class_heritage (_) @extends))
