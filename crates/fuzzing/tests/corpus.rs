//! Replays, on stable, every committed fuzz corpus input and every seed through its target's
//! check: what fuzzing found once (kept under `fuzz/corpus/<target>/`, crashes as named
//! `regression-*` files) stays fixed.

use std::path::PathBuf;

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

#[test]
fn every_corpus_input_passes_its_check() {
    let mut replayed = 0;
    for (target, check) in starling_fuzzing::TARGETS {
        let dir = corpus_dir(target);
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|err| panic!("{}: {err} (every target has a corpus)", dir.display()));
        for entry in entries {
            let path = entry.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            let result = std::panic::catch_unwind(|| check(&data));
            assert!(
                result.is_ok(),
                "{target}: {} fails its check",
                path.display()
            );
            replayed += 1;
        }
    }
    assert!(
        replayed >= starling_fuzzing::TARGETS.len(),
        "{replayed} inputs"
    );
}

#[test]
fn every_seed_passes_and_every_target_has_seeds() {
    let seeds = starling_fuzzing::seeds();
    for (target, _) in starling_fuzzing::TARGETS {
        assert!(
            seeds.iter().any(|(t, _)| t == target),
            "no seed for {target}"
        );
    }
    for (target, data) in seeds {
        let (_, check) = starling_fuzzing::TARGETS
            .iter()
            .find(|(t, _)| *t == target)
            .unwrap();
        // A seed that no longer decodes would leave its target fuzzing from nothing.
        assert!(check(&data), "{target} seed {data:?} does not decode");
    }
}
