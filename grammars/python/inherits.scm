; Inheritance: class @type(@extends, ...).
(class_definition
  name: (identifier) @type
  superclasses: (argument_list [(identifier) (attribute)] @extends))
