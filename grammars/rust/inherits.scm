; Trait impls (@type implements @implements) and supertraits (@type extends @extends).
(impl_item trait: (_) @implements type: (_) @type)
(trait_item name: (type_identifier) @type bounds: (trait_bounds (_) @extends))
