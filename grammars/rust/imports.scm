; Dependencies: `use` paths (@source), `mod name;` declarations (@module) and extern crates.
(use_declaration argument: (_) @source)
(mod_item name: (identifier) @module !body)
(extern_crate_declaration name: (identifier) @source)
