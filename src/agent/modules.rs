//! The module directories an agent-loop request names (`src/auth/`), checked and normalised the
//! same way for every builder: confined to the project root, relative, `/`-terminated,
//! deduplicated; a name for the root itself means "no module filter".

use std::path::{Component, Path};

use crate::error::{Error, Result};
use crate::memory;

/// Most modules a request may name.
pub const MAX_MODULES: usize = 50;

/// `modules` as module keys (`src/auth/`), in their order without repeats. `ENGRAM_INVALID_ARG`
/// for more than [`MAX_MODULES`] or a path outside the project root.
pub(crate) fn normalised(modules: &[String], root: Option<&Path>) -> Result<Vec<String>> {
    if modules.len() > MAX_MODULES {
        return Err(Error::invalid(format!(
            "modules has {} entries; at most {MAX_MODULES} are accepted",
            modules.len()
        )));
    }
    let mut out = Vec::with_capacity(modules.len());
    for module in modules {
        // The root itself holds every file: no module filter is what that means.
        if names_the_root(module, root) {
            continue;
        }
        let relative = memory::input::confine_path(module, root)
            .map_err(|e| Error::invalid(format!("modules: {e}")))?;
        let key = format!("{}/", relative.trim_end_matches('/'));
        if !out.contains(&key) {
            out.push(key);
        }
    }
    Ok(out)
}

/// Whether `module` names the project root (`.`, `./`, or the root's absolute path).
fn names_the_root(module: &str, root: Option<&Path>) -> bool {
    let path = Path::new(module);
    let relative = match root {
        Some(root) if path.is_absolute() => match path.strip_prefix(root) {
            Ok(rest) => rest,
            Err(_) => return false,
        },
        _ => path,
    };
    relative
        .components()
        .all(|c| matches!(c, Component::CurDir))
}

/// Whether `file` (a project-relative path) lies under one of `modules` (all files when there
/// are none).
pub(crate) fn covers(modules: &[String], file: &str) -> bool {
    modules.is_empty() || modules.iter().any(|m| file.starts_with(m.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_become_relative_slash_terminated_keys() {
        let root = Path::new("/repo");
        let given = ["src/auth", "./src/auth/", "/repo/lib/", ".", "/repo"].map(String::from);
        assert_eq!(
            normalised(&given, Some(root)).unwrap(),
            vec!["src/auth/".to_owned(), "lib/".to_owned()]
        );
        assert!(normalised(&["../elsewhere".into()], Some(root)).is_err());
        let too_many: Vec<String> = (0..=MAX_MODULES).map(|i| format!("m{i}")).collect();
        assert!(normalised(&too_many, Some(root)).is_err());
    }

    #[test]
    fn covers_is_a_directory_prefix() {
        let modules = vec!["src/auth/".to_owned()];
        assert!(covers(&modules, "src/auth/login.ts"));
        assert!(covers(&modules, "src/auth/jwt/verify.ts"));
        assert!(!covers(&modules, "src/authz/policy.ts"));
        assert!(covers(&[], "anything.ts"));
    }
}
