//! Where an index may keep its objects: the rules a storage URL is checked
//! against when a setting or an index option names it (the skin resolves
//! symbolic links first, see `normalize_path`).

use std::path::{Component, Path, PathBuf};

/// `path` with `.` and `..` resolved by their names alone (no file
/// system access): `/a/b/../c` is `/a/c`. Above the root stays the root.
pub fn normalize_path(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `path` as the server would reach it: `.` and `..` resolved, and the
/// symbolic links of its longest existing ancestor.
pub fn resolve_path(path: &Path) -> PathBuf {
    let path = normalize_path(path);
    let mut existing = path.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return rest.iter().rev().fold(real, |p, part| p.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return path,
        }
    }
}

/// Whether `url` is a `file://` location inside `data_dir` (objects
/// written there could overwrite the server's own files), other than
/// `default`, the embedded default store, which lives there by design.
/// Paths are compared resolved, links included.
pub fn is_inside_data_dir(url: &str, data_dir: &Path, default: &str) -> bool {
    let Some(path) = url.strip_prefix("file://") else { return false };
    let target = resolve_path(Path::new(path));
    let default = resolve_path(Path::new(default.strip_prefix("file://").unwrap_or(default)));
    target.starts_with(resolve_path(data_dir)) && target != default
}

/// Whether `url` falls under one of `prefixes` (a comma-separated list,
/// as `milvus.allowed_storage_urls` holds it): equal to one, or below
/// it at a `/`. `file://` URLs are compared by normalized path, so `..`
/// cannot climb out of an allowed directory.
pub fn is_allowed(url: &str, prefixes: &str) -> bool {
    let under = |url: &str, prefix: &str| {
        let prefix = prefix.trim_end_matches('/');
        url == prefix || url.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('/'))
    };
    let as_path = |u: &str| u.strip_prefix("file://").map(|p| normalize_path(Path::new(p)));
    prefixes.split(',').map(str::trim).filter(|p| !p.is_empty()).any(|prefix| match (as_path(url), as_path(prefix)) {
        (Some(path), Some(dir)) => path.starts_with(dir),
        (None, None) => under(url, prefix),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_directory_is_found_through_links_and_dots() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(data.join("pg_milvus/objects")).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&data, &link).unwrap();
        let default = format!("file://{}/pg_milvus/objects", data.display());
        let inside = |url: String| is_inside_data_dir(&url, &data, &default);
        assert!(inside(format!("file://{}/base", data.display())));
        assert!(inside(format!("file://{}/base/new/dir", link.display())), "through a link, not yet created");
        assert!(inside(format!("file://{}/../data/global", data.display())));
        assert!(!inside(default.clone()), "the embedded default is allowed");
        assert!(!inside(format!("file://{}/pg_milvus/objects", link.display())), "the default through a link");
        assert!(!inside(format!("file://{}/elsewhere", dir.path().display())));
        assert!(!inside("s3://bucket/prefix".to_owned()));
    }

    #[test]
    fn dot_dot_cannot_hide_a_path() {
        assert_eq!(normalize_path(Path::new("/srv/x/../../var/lib/pg/./base")), PathBuf::from("/var/lib/pg/base"));
        assert_eq!(normalize_path(Path::new("/../..")), PathBuf::from("/"));
        // As the skin compares a resolved path with the data directory.
        let within = |p: &str, d: &str| normalize_path(Path::new(p)).starts_with(normalize_path(Path::new(d)));
        assert!(within("/tmp/a/../../var/lib/pg/base", "/var/lib/pg"));
        assert!(within("/var/lib/pg", "/var/lib/pg/"));
        assert!(!within("/var/lib/pgdata2", "/var/lib/pg"));
    }

    #[test]
    fn allowed_prefixes_match_at_a_boundary() {
        let allowed = "s3://shared/milvus, file:///srv/milvus/";
        assert!(is_allowed("s3://shared/milvus", allowed));
        assert!(is_allowed("s3://shared/milvus/team-a", allowed));
        assert!(!is_allowed("s3://shared/milvus-evil", allowed));
        assert!(!is_allowed("s3://other/milvus", allowed));
        assert!(is_allowed("file:///srv/milvus/a", allowed));
        assert!(!is_allowed("file:///srv/milvus/../../etc", allowed));
        assert!(!is_allowed("file:///srv/milvusx", allowed));
        assert!(!is_allowed("s3://shared/milvus", ""));
    }
}
