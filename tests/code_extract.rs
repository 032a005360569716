//! Structural extraction on the fixtures: definitions, imports, calls and inheritance as the
//! knowledge graph's layer 1 will receive them, from real tree-sitter parses.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use engram::code::{analyze, AnalyzeOptions, DefKind, FileAnalysis, FileKind, RefKind};

fn analyze_fixture(name: &str) -> FileAnalysis {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/code")
        .join(name);
    let bytes = std::fs::read(&path).unwrap();
    let mut parser = tree_sitter::Parser::new();
    let kind = FileKind::of(&path).unwrap();
    analyze(
        &mut parser,
        name,
        &bytes,
        kind,
        &AnalyzeOptions::default(),
        &AtomicBool::new(false),
    )
}

fn refs(a: &FileAnalysis, kind: RefKind) -> Vec<(Option<&str>, &str)> {
    a.references
        .iter()
        .filter(|r| r.kind == kind)
        .map(|r| (r.from_symbol.as_deref(), r.target.as_str()))
        .collect()
}

/// `(target, member)` of every import, in file order.
fn imports_with_members(a: &FileAnalysis) -> Vec<(&str, Option<&str>)> {
    a.references
        .iter()
        .filter(|r| r.kind == RefKind::Imports)
        .map(|r| (r.target.as_str(), r.member.as_deref()))
        .collect()
}

fn defs(a: &FileAnalysis) -> Vec<(DefKind, &str)> {
    a.definitions
        .iter()
        .map(|d| (d.kind, d.qualified_name.as_str()))
        .collect()
}

#[test]
fn typescript_definitions_imports_calls_and_heritage() {
    let a = analyze_fixture("sample.ts");
    assert_eq!(
        defs(&a),
        [
            (DefKind::Type, "UserId"),
            (DefKind::Interface, "User"),
            (DefKind::Enum, "Role"),
            (DefKind::Class, "TokenService"),
            (DefKind::Method, "TokenService.constructor"),
            (DefKind::Method, "TokenService.sign"),
            (DefKind::Method, "TokenService.verify"),
            (DefKind::Method, "TokenService.dispose"),
            (DefKind::Function, "requireUser"),
            (DefKind::Function, "isAdmin"),
            (DefKind::Function, "noop"),
        ]
    );
    let imports: Vec<_> = refs(&a, RefKind::Imports)
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(imports, ["node:crypto", "./http", "../session/index"]);
    let calls = refs(&a, RefKind::Calls);
    assert!(calls.contains(&(Some("TokenService.sign"), "createHash")));
    assert!(calls.contains(&(Some("requireUser"), "verify")));
    assert!(calls.contains(&(Some("isAdmin"), "includes")));
    let createhash_in_sign = calls
        .iter()
        .filter(|c| **c == (Some("TokenService.sign"), "createHash"))
        .count();
    assert_eq!(createhash_in_sign, 1, "a caller-callee pair is kept once");
    assert_eq!(
        refs(&a, RefKind::Extends),
        [(Some("TokenService"), "BaseService")]
    );
    assert_eq!(
        refs(&a, RefKind::Implements),
        [(Some("TokenService"), "Disposable")]
    );
}

#[test]
fn python_methods_decorators_relative_imports_and_bases() {
    let a = analyze_fixture("sample.py");
    let d = defs(&a);
    assert!(d.contains(&(DefKind::Class, "Price")));
    assert!(d.contains(&(DefKind::Method, "OrderService.validate")));
    let validate = a.definitions.iter().find(|d| d.name == "validate").unwrap();
    assert_eq!(
        validate.start_line, 40,
        "the decorator belongs to the method"
    );
    let imports = imports_with_members(&a);
    assert_eq!(
        imports,
        [
            ("logging", None),
            ("dataclasses", Some("dataclass")),
            (".", Some("rules")),
            (".models", Some("Order")),
            (".models", Some("LineItem")),
        ]
    );
    assert!(refs(&a, RefKind::Calls).contains(&(Some("OrderService.price"), "total")));
    assert_eq!(
        refs(&a, RefKind::Extends),
        [(Some("OrderService"), "BaseService")]
    );
}

#[test]
fn rust_impls_traits_mods_and_macros() {
    let a = analyze_fixture("sample.rs");
    let d = defs(&a);
    assert!(d.contains(&(DefKind::Impl, "Cache")));
    assert!(d.contains(&(DefKind::Method, "Cache.insert")));
    assert!(
        d.contains(&(DefKind::Method, "Store.load")),
        "trait methods are methods"
    );
    assert!(d.contains(&(DefKind::Function, "hash_key")));
    let imports = imports_with_members(&a);
    assert_eq!(
        imports,
        [
            ("std::collections::HashMap", None),
            ("std::time", None),
            ("crate::clock::Clock", None),
            ("eviction", Some("mod")),
        ]
    );
    let calls = refs(&a, RefKind::Calls);
    assert!(calls.contains(&(Some("Cache.insert"), "maybe_evict")));
    assert!(calls.contains(&(Some("Cache.get"), "remove")));
    assert_eq!(refs(&a, RefKind::Implements), [(Some("Cache"), "Default")]);
    assert_eq!(refs(&a, RefKind::Extends), [(Some("Store"), "Send")]);
}

#[test]
fn go_methods_are_named_by_receiver_and_embedding_is_extension() {
    let a = analyze_fixture("sample.go");
    let d = defs(&a);
    assert!(d.contains(&(DefKind::Method, "Server.Start")));
    assert!(d.contains(&(DefKind::Method, "Server.routes")));
    assert!(d.contains(&(DefKind::Struct, "Server")));
    assert!(d.contains(&(DefKind::Interface, "Handler")));
    assert!(d.contains(&(DefKind::Type, "ID")));
    let imports: Vec<_> = refs(&a, RefKind::Imports)
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(
        imports,
        ["context", "net/http", "example.com/app/internal/store"]
    );
    assert!(refs(&a, RefKind::Calls).contains(&(Some("Server.Start"), "ListenAndServe")));
    assert_eq!(refs(&a, RefKind::Extends), [(Some("Server"), "Logger")]);
}

#[test]
fn jsx_and_tsx_parse_with_their_grammars() {
    let jsx = analyze_fixture("sample.jsx");
    assert!(jsx.issues.is_empty(), "{:?}", jsx.issues);
    assert!(defs(&jsx).contains(&(DefKind::Method, "Store.add")));
    assert_eq!(
        refs(&jsx, RefKind::Extends),
        [(Some("Store"), "EventEmitter")]
    );
    let imports: Vec<_> = refs(&jsx, RefKind::Imports)
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(imports, ["react", "./api"]);
    let tsx = analyze_fixture("sample.tsx");
    assert!(tsx.issues.is_empty(), "{:?}", tsx.issues);
    assert!(refs(&tsx, RefKind::Calls).contains(&(Some("PriceList"), "formatPrice")));
}
