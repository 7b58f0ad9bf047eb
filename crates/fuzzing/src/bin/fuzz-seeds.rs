//! Writes every target's seeds into `<corpus>/<target>/seed-<hash>` (default `fuzz/corpus`),
//! named by content so running it again adds nothing twice.

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let root = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("fuzz/corpus"));
    for (target, _) in starling_fuzzing::TARGETS {
        std::fs::create_dir_all(root.join(target))?;
    }
    let mut written = 0;
    for (target, data) in starling_fuzzing::seeds() {
        let path = root
            .join(target)
            .join(format!("seed-{:016x}", fnv1a(&data)));
        if !path.exists() {
            std::fs::write(&path, &data)?;
            written += 1;
        }
    }
    println!("{written} seeds written under {}", root.display());
    Ok(())
}

/// FNV-1a: stable across toolchains, so a seed keeps its file name.
fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}
