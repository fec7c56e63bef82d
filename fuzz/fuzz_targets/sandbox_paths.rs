//! The sandbox's path resolution (`sandbox::workspace`) inside a temporary tree, with
//! containment as the property: whatever path is asked for, an open either is refused or
//! reaches a file or directory beneath the root (read back from the descriptor), never the
//! secret beside it and never a denylisted file; and the path it reports is relative.
#![no_main]

use std::io::Read;
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mcp_stdio::sandbox::Denylist;
use mcp_stdio::sandbox::workspace::Workspace;

struct Tree {
    _top: tempfile::TempDir,
    root: PathBuf,
    workspace: Workspace,
}

const SECRET: &[u8] = b"OUTSIDE-SECRET";

fn tree() -> &'static Tree {
    static TREE: OnceLock<Tree> = OnceLock::new();
    TREE.get_or_init(|| {
        let top = tempfile::tempdir().unwrap();
        let root = top.path().join("root");
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::write(root.join("src/a.txt"), "inside").unwrap();
        std::fs::write(root.join(".env"), "DENIED").unwrap();
        std::fs::write(top.path().join("secret.txt"), SECRET).unwrap();
        symlink("../secret.txt", root.join("out")).unwrap();
        symlink(top.path().join("secret.txt"), root.join("abs-out")).unwrap();
        symlink("..", root.join("src/up")).unwrap();
        symlink("a.txt", root.join("src/in")).unwrap();
        symlink(".env", root.join("to-env")).unwrap();
        symlink("/proc/self/root", root.join("proc")).unwrap();
        let root = std::fs::canonicalize(&root).unwrap();
        let workspace = Workspace::open(&root, Denylist::new(&[], &[]).unwrap()).unwrap();
        Tree { _top: top, root, workspace }
    })
}

fuzz_target!(|input: &[u8]| {
    let Ok(requested) = std::str::from_utf8(input) else { return };
    let tree = tree();
    let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NONBLOCK;
    let Ok(opened) = tree.workspace.open_beneath(requested, flags) else { return };
    assert!(!opened.path.starts_with('/'), "{requested:?} reported {:?}", opened.path);
    assert!(!opened.path.split('/').any(|c| c == ".."), "{:?}", opened.path);
    let fd = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&opened.fd));
    let reached = std::fs::read_link(&fd).unwrap();
    assert!(reached.starts_with(&tree.root), "{requested:?} reached {reached:?}");
    assert!(!reached.ends_with(".env"), "{requested:?} reached a denied file");
    if let Ok((mut file, _)) = tree.workspace.open_file(requested) {
        let mut content = Vec::new();
        let _ = file.read_to_end(&mut content);
        assert_ne!(content, SECRET, "{requested:?} read the outside secret");
    }
});
