//! How an export is compared with the input, frame by frame: what may differ at its start
//! (it begins where it may: a keyframe for video) and at its end (what moq-cli may lose of
//! its tail), and nothing else.

use anyhow::{bail, ensure};

/// The encoder's group of pictures, in frames (one keyframe a second).
pub const GOP: usize = 25;

/// The media a comparison covers.
#[derive(Clone, Copy, Debug)]
pub enum Media {
    Video,
    Audio,
}

impl Media {
    /// ffmpeg's stream selector for it.
    pub fn map(self) -> &'static str {
        match self {
            Media::Video => "0:v",
            Media::Audio => "0:a",
        }
    }

    /// What is hashed: decoded pictures for video; for audio the AAC packets themselves (a
    /// decoded AAC frame depends on the packet before it, so an export that starts later
    /// decodes its first frame differently).
    pub fn codec(self) -> &'static [&'static str] {
        match self {
            Media::Video => &[],
            Media::Audio => &["-c", "copy"],
        }
    }

    /// Where an export may start: at a keyframe for video, anywhere for audio.
    pub fn starts_every(self) -> usize {
        match self {
            Media::Video => GOP,
            Media::Audio => 1,
        }
    }
}

/// The export must be the input from where it may start (a keyframe, for video) on, frame for
/// frame, through the input's frame `through` (exclusive) at least: the input's end for a
/// [`Tail::Whole`] case. Past `through` (the margin of a [`Tail::Margin`] case) moq-cli may
/// lose what it sends at its end: whole groups may be missing (the export going on at a later
/// point where it may start), and its very last frame may be cut short; anything else that
/// differs (a frame dropped inside a group, corrupted or reordered) still fails.
pub fn compare(
    media: Media,
    input: &[String],
    exported: &[String],
    through: usize,
) -> anyhow::Result<()> {
    let Some(first) = exported.first() else {
        bail!("the export decoded to no {media:?} frame");
    };
    let Some(start) = input.iter().position(|f| f == first) else {
        bail!("the export's first {media:?} frame is no frame of the input");
    };
    ensure!(
        start % media.starts_every() == 0,
        "the export starts at input {media:?} frame {start}, not at a keyframe"
    );
    // The input frame the export's next one must be.
    let mut next = start;
    for (i, got) in exported.iter().enumerate() {
        if input.get(next) == Some(got) {
            next += 1;
            continue;
        }
        if next >= through && next < input.len() {
            // Groups moq-cli lost at its end: the export goes on at a later group's start.
            let later = input[next..]
                .iter()
                .position(|f| f == got)
                .map(|at| next + at);
            if let Some(at) = later.filter(|at| at % media.starts_every() == 0) {
                next = at + 1;
                continue;
            }
            // What moq-cli had of a frame when its session ended under it (docs/spec-notes.md,
            // "moq-cli at the end of its input"): it decodes with errors.
            if i + 1 == exported.len() {
                next += 1;
                continue;
            }
        }
        bail!(
            "export {media:?} frame {i} (input frame {next}) differs: a frame dropped, corrupted \
             or reordered"
        );
    }
    ensure!(
        next >= through,
        "the export holds {} {media:?} frames from input frame {start}, ending before input \
         frame {through}",
        exported.len(),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Tail, SECONDS};

    #[test]
    fn the_comparison_fails_on_a_dropped_corrupted_or_reordered_frame() {
        let input: Vec<String> = (0..100).map(|i| format!("{i:032x}")).collect();
        let end = input.len();
        let whole = input[25..].to_vec();
        assert!(compare(Media::Video, &input, &whole, end).is_ok());
        let mut dropped = whole.clone();
        dropped.remove(40);
        assert!(compare(Media::Video, &input, &dropped, end).is_err());
        let mut corrupted = whole.clone();
        corrupted[10] = "x".into();
        assert!(compare(Media::Video, &input, &corrupted, end).is_err());
        let mut reordered = whole.clone();
        reordered.swap(3, 4);
        assert!(compare(Media::Video, &input, &reordered, end).is_err());
        assert!(
            compare(Media::Video, &input, &whole[..whole.len() - 1], end).is_err(),
            "a cut tail"
        );
        let mut last = whole.clone();
        *last.last_mut().unwrap() = "x".into();
        assert!(
            compare(Media::Video, &input, &last, end).is_err(),
            "a whole case's last frame cut short"
        );
        assert!(
            compare(Media::Video, &input, &input[3..], end).is_err(),
            "not at a keyframe"
        );
        assert!(
            compare(Media::Audio, &input, &input[3..], end).is_ok(),
            "audio starts anywhere"
        );
    }

    #[test]
    fn a_margin_case_may_cut_only_what_follows_its_seconds() {
        let tail = Tail::Margin;
        let input: Vec<String> = (0..tail.seconds() as usize * 25)
            .map(|i| format!("{i:032x}"))
            .collect();
        let through = tail.through(input.len());
        assert_eq!(through, SECONDS as usize * 25);
        assert!(compare(Media::Video, &input, &input[..through], through).is_ok());
        assert!(
            compare(Media::Video, &input, &input[..through - 1], through).is_err(),
            "a frame of the compared seconds missing"
        );
        let mut dropped = input[..through + 10].to_vec();
        dropped.remove(through + 5);
        assert!(
            compare(Media::Video, &input, &dropped, through).is_err(),
            "a frame dropped in the margin is still a drop"
        );
        assert!(
            compare(Media::Video, &input, &input[25..through + 3], through).is_ok(),
            "from a keyframe"
        );
        let mut lost_group = input[..through].to_vec();
        lost_group.extend_from_slice(&input[through + 25..through + 40]);
        assert!(
            compare(Media::Video, &input, &lost_group, through).is_ok(),
            "a group lost past the compared seconds, the next one whole"
        );
        let mut early = input[..50].to_vec();
        early.extend_from_slice(&input[75..]);
        assert!(
            compare(Media::Video, &input, &early, through).is_err(),
            "a group lost inside the compared seconds"
        );
        let mut mid_group = input[..through].to_vec();
        mid_group.extend_from_slice(&input[through + 30..through + 40]);
        assert!(
            compare(Media::Video, &input, &mid_group, through).is_err(),
            "past them, going on mid-group is a drop"
        );
        let mut cut = input[..through + 10].to_vec();
        *cut.last_mut().unwrap() = "cut short".into();
        assert!(
            compare(Media::Video, &input, &cut, through).is_ok(),
            "the last frame past the compared seconds may be cut short"
        );
        cut.push(input[through + 10].clone());
        assert!(
            compare(Media::Video, &input, &cut, through).is_err(),
            "a cut frame with frames after it is a corrupted one"
        );
        let mut cut = input[..through].to_vec();
        *cut.last_mut().unwrap() = "cut short".into();
        assert!(
            compare(Media::Video, &input, &cut, through).is_err(),
            "the compared seconds' last frame is never cut"
        );
    }
}
