//! Import resolution: which project file (or, for Go, package directory) an import names.
//! Pure: works on the set of project paths, so the indexer resolves every file's imports once
//! the walk is done, and a re-index resolves against the paths already indexed.
//!
//! Covered: relative TS/JS specifiers (extensions, `index` files, `.js` written for a `.ts`
//! source), Python absolute and relative modules and packages, Rust `mod name;` and
//! `crate::` / `self::` / `super::` paths, Go packages inside a module declared by `go.mod`.
//! Anything else (packages from registries, the standard library) stays unresolved.

use std::collections::HashSet;

use super::extract::Reference;
use super::language::Language;

/// What resolution needs to know about the project: its relative paths (`/`-separated),
/// their directories, and the Go modules declared in it.
#[derive(Debug, Default, Clone)]
pub struct ProjectFiles {
    files: HashSet<String>,
    dirs: HashSet<String>,
    /// `(module path, directory of its go.mod)`.
    go_modules: Vec<(String, String)>,
}

impl ProjectFiles {
    /// Adds a project-relative file path.
    pub fn insert(&mut self, path: &str) {
        let mut dir = parent(path);
        while self.dirs.insert(dir.to_owned()) && !dir.is_empty() {
            dir = parent(dir);
        }
        self.files.insert(path.to_owned());
    }

    /// Removes a file (its directories stay: they may hold other files, and a directory that
    /// no longer holds one only matters to Go package imports, which resolve to directories).
    pub fn remove(&mut self, path: &str) {
        self.files.remove(path);
    }

    /// Records a `go.mod` at `path` with its text.
    pub fn add_go_mod(&mut self, path: &str, text: &str) {
        let module = text.lines().find_map(|l| l.trim().strip_prefix("module "));
        if let Some(module) = module {
            let module = module.trim().trim_matches('"').to_owned();
            self.go_modules.push((module, parent(path).to_owned()));
        }
    }

    /// Whether `path` is a known file.
    pub fn contains(&self, path: &str) -> bool {
        self.files.contains(path)
    }

    fn first_file(&self, candidates: impl IntoIterator<Item = String>) -> Option<String> {
        candidates.into_iter().find(|c| self.files.contains(c))
    }

    /// Resolves an import in `from` (a project-relative path) to a project path.
    pub fn resolve(&self, language: Language, from: &str, import: &Reference) -> Option<String> {
        match language {
            Language::TypeScript | Language::Tsx | Language::JavaScript => {
                self.resolve_js(from, &import.target)
            }
            Language::Python => self.resolve_python(from, &import.target, import.member.as_deref()),
            Language::Rust => self.resolve_rust(from, &import.target, import.member.as_deref()),
            Language::Go => self.resolve_go(&import.target),
        }
    }

    fn resolve_js(&self, from: &str, spec: &str) -> Option<String> {
        if !spec.starts_with('.') {
            return None;
        }
        let base = normalize(&join(parent(from), spec))?;
        const EXTS: [&str; 8] = [
            ".ts", ".tsx", ".d.ts", ".js", ".jsx", ".mjs", ".cjs", ".mts",
        ];
        let mut candidates = vec![base.clone()];
        // TS sources import their compiled name: `./x.js` means `./x.ts`.
        let sources: [(&str, &[&str]); 3] = [
            (".js", &[".ts", ".tsx"]),
            (".mjs", &[".mts"]),
            (".cjs", &[".cts"]),
        ];
        for (written, source) in sources {
            if let Some(stem) = base.strip_suffix(written) {
                candidates.extend(source.iter().map(|e| format!("{stem}{e}")));
            }
        }
        candidates.extend(EXTS.iter().map(|e| format!("{base}{e}")));
        candidates.extend(EXTS.iter().map(|e| format!("{}{e}", join(&base, "index"))));
        self.first_file(candidates)
    }

    fn resolve_python(&self, from: &str, module: &str, member: Option<&str>) -> Option<String> {
        let dots = module.bytes().take_while(|b| *b == b'.').count();
        let parts: Vec<&str> = module[dots..]
            .split('.')
            .filter(|p| !p.is_empty())
            .collect();
        let roots: Vec<String> = if dots > 0 {
            let mut dir = parent(from);
            for _ in 1..dots {
                dir = parent(dir);
            }
            vec![dir.to_owned()]
        } else {
            ["", "src", "lib"].iter().map(|r| (*r).to_owned()).collect()
        };
        let module_files = |root: &str, parts: &[&str]| {
            let path = join(root, &parts.join("/"));
            [
                format!("{path}.py"),
                format!("{path}.pyi"),
                join(&path, "__init__.py"),
            ]
        };
        for root in &roots {
            if let Some(member) = member {
                let mut with_member = parts.clone();
                with_member.push(member);
                if let Some(found) = self.first_file(module_files(root, &with_member)) {
                    return Some(found);
                }
            }
            if !parts.is_empty() {
                if let Some(found) = self.first_file(module_files(root, &parts)) {
                    return Some(found);
                }
            } else if let Some(found) = self.first_file([join(root, "__init__.py")]) {
                return Some(found);
            }
        }
        None
    }

    fn resolve_rust(&self, from: &str, path: &str, member: Option<&str>) -> Option<String> {
        let (root, module) = self.rust_module_of(from)?;
        if member == Some("mod") {
            let mut segments = module;
            segments.push(path.to_owned());
            return self.rust_module_file(&root, &segments);
        }
        let mut segments: Vec<String> = Vec::new();
        let mut words = path.split("::").map(str::trim).peekable();
        match words.peek().copied() {
            Some("crate") => {
                words.next();
            }
            Some("self") => {
                words.next();
                segments = module;
            }
            Some("super") => {
                segments = module;
                while words.peek() == Some(&"super") {
                    words.next();
                    segments.pop()?;
                }
            }
            _ => return None,
        }
        segments.extend(words.filter(|w| !w.is_empty()).map(str::to_owned));
        // The tail may name items inside a module: try the longest module path first.
        while !segments.is_empty() {
            if let Some(found) = self.rust_module_file(&root, &segments) {
                return Some(found);
            }
            segments.pop();
        }
        None
    }

    /// The crate root directory holding `from` and `from`'s module path below it.
    fn rust_module_of(&self, from: &str) -> Option<(String, Vec<String>)> {
        let mut dir = parent(from);
        loop {
            if self.files.contains(&join(dir, "lib.rs"))
                || self.files.contains(&join(dir, "main.rs"))
            {
                break;
            }
            if dir.is_empty() {
                return None;
            }
            dir = parent(dir);
        }
        let relative = from
            .strip_prefix(dir)
            .unwrap_or(from)
            .trim_start_matches('/');
        let mut module: Vec<String> = relative
            .trim_end_matches(".rs")
            .split('/')
            .map(str::to_owned)
            .collect();
        match module.last().map(String::as_str) {
            Some("mod") => {
                module.pop();
            }
            // `lib.rs` / `main.rs` are the crate root only at the root itself.
            Some("lib" | "main") if module.len() == 1 => {
                module.pop();
            }
            _ => {}
        }
        Some((dir.to_owned(), module))
    }

    fn rust_module_file(&self, root: &str, segments: &[String]) -> Option<String> {
        let path = join(root, &segments.join("/"));
        self.first_file([format!("{path}.rs"), join(&path, "mod.rs")])
    }

    fn resolve_go(&self, import: &str) -> Option<String> {
        let import = import.trim_matches(|c| c == '"' || c == '`');
        self.go_modules.iter().find_map(|(module, dir)| {
            let rest = import.strip_prefix(module.as_str())?;
            if !(rest.is_empty() || rest.starts_with('/')) {
                return None;
            }
            let package = join(dir, rest.trim_start_matches('/'));
            self.dirs.contains(&package).then_some(package)
        })
    }
}

/// The directory part of a relative path (`""` at the root).
fn parent(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

fn join(dir: &str, rest: &str) -> String {
    match (dir.is_empty(), rest.is_empty()) {
        (true, _) => rest.to_owned(),
        (_, true) => dir.to_owned(),
        _ => format!("{dir}/{rest}"),
    }
}

/// Resolves `.` and `..`; `None` when the path climbs out of the root.
fn normalize(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::extract::RefKind;

    fn import(target: &str, member: Option<&str>) -> Reference {
        Reference {
            kind: RefKind::Imports,
            from_symbol: None,
            target: target.to_owned(),
            member: member.map(str::to_owned),
            line: 1,
        }
    }

    fn project(paths: &[&str]) -> ProjectFiles {
        let mut files = ProjectFiles::default();
        for p in paths {
            files.insert(p);
        }
        files
    }

    #[test]
    fn js_imports_find_extensions_index_files_and_ts_sources_of_js_names() {
        let p = project(&[
            "src/http.ts",
            "src/session/index.ts",
            "src/util.js",
            "src/a/b.tsx",
            "lib/x.ts",
        ]);
        let r = |from: &str, spec: &str| p.resolve(Language::TypeScript, from, &import(spec, None));
        assert_eq!(
            r("src/auth/tokens.ts", "../http").as_deref(),
            Some("src/http.ts")
        );
        assert_eq!(
            r("src/auth/tokens.ts", "../session").as_deref(),
            Some("src/session/index.ts")
        );
        assert_eq!(
            r("src/main.ts", "./http.js").as_deref(),
            Some("src/http.ts")
        );
        assert_eq!(
            r("src/main.ts", "./util.js").as_deref(),
            Some("src/util.js")
        );
        assert_eq!(r("src/main.ts", "./a/b").as_deref(), Some("src/a/b.tsx"));
        assert_eq!(r("src/main.ts", "react"), None);
        assert_eq!(r("src/main.ts", "../../../etc/passwd"), None);
    }

    #[test]
    fn python_imports_find_modules_packages_and_relative_names() {
        let p = project(&[
            "app/__init__.py",
            "app/models.py",
            "app/rules/__init__.py",
            "app/orders.py",
            "src/tools/cli.py",
        ]);
        let r = |from: &str, module: &str, member: Option<&str>| {
            p.resolve(Language::Python, from, &import(module, member))
        };
        assert_eq!(
            r("app/orders.py", ".", Some("rules")).as_deref(),
            Some("app/rules/__init__.py")
        );
        assert_eq!(
            r("app/orders.py", ".models", Some("Order")).as_deref(),
            Some("app/models.py")
        );
        assert_eq!(
            r("app/rules/__init__.py", "..models", None).as_deref(),
            Some("app/models.py")
        );
        assert_eq!(
            r("main.py", "app.models", None).as_deref(),
            Some("app/models.py")
        );
        assert_eq!(
            r("main.py", "tools.cli", None).as_deref(),
            Some("src/tools/cli.py")
        );
        assert_eq!(r("main.py", "logging", None), None);
    }

    #[test]
    fn rust_paths_find_module_files() {
        let p = project(&[
            "src/lib.rs",
            "src/code/mod.rs",
            "src/code/chunk.rs",
            "src/store/pool.rs",
            "src/store.rs",
            "src/code/chunk/lines.rs",
        ]);
        let r = |from: &str, path: &str, member: Option<&str>| {
            p.resolve(Language::Rust, from, &import(path, member))
        };
        assert_eq!(
            r("src/lib.rs", "code", Some("mod")).as_deref(),
            Some("src/code/mod.rs")
        );
        assert_eq!(
            r("src/code/mod.rs", "chunk", Some("mod")).as_deref(),
            Some("src/code/chunk.rs")
        );
        assert_eq!(
            r("src/code/chunk.rs", "lines", Some("mod")).as_deref(),
            Some("src/code/chunk/lines.rs")
        );
        assert_eq!(
            r("src/code/chunk.rs", "crate::store::pool::Reader", None).as_deref(),
            Some("src/store/pool.rs")
        );
        assert_eq!(
            r("src/code/chunk.rs", "super::chunk::Chunk", None).as_deref(),
            Some("src/code/chunk.rs")
        );
        assert_eq!(
            r("src/code/mod.rs", "self::chunk::Lines", None).as_deref(),
            Some("src/code/chunk.rs")
        );
        assert_eq!(
            r("src/code/chunk.rs", "std::collections::HashMap", None),
            None
        );
    }

    #[test]
    fn go_imports_find_package_directories_of_the_module() {
        let mut p = project(&["go.mod", "cmd/main.go", "internal/store/store.go"]);
        p.add_go_mod("go.mod", "module example.com/app\n\ngo 1.22\n");
        let r = |spec: &str| p.resolve(Language::Go, "cmd/main.go", &import(spec, None));
        assert_eq!(
            r("\"example.com/app/internal/store\"").as_deref(),
            Some("internal/store")
        );
        assert_eq!(r("\"example.com/application/x\""), None);
        assert_eq!(r("\"net/http\""), None);
    }
}
