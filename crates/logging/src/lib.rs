//! Log directive lists: plain `target=level` lists run on `Targets`, span and field directives on `EnvFilter`.
//!
//! Design rule 7 ("logging costs nothing when off"): `EnvFilter` takes a read lock on every span
//! enter, exit and close to look for span-scoped directives even when it has none, while
//! `Targets` answers from the callsite interest cache alone. So a list that only names targets
//! and levels (`info,starling_session=debug`) is built as a [`Targets`]; only a list that names a
//! span or a field (`[accept]=debug`, `starling[{peer}]=trace`, `relay[session{id=7}]=debug`)
//! falls back to [`EnvFilter`]. A directive with an empty level (`starling=`) also stays on
//! `EnvFilter`, because the two parsers read it differently (`EnvFilter`: trace, `Targets`:
//! error).
//!
//! Both filters then see the same list with the same meaning: every directive is checked with
//! `EnvFilter`'s own parser first (so an invalid directive is an error on either path, never
//! silently dropped), and a plain directive is converted to a `Targets` entry exactly as
//! `EnvFilter` reads it: a bare level is the default, a bare target enables every level, level
//! names ignore case and `0`..`5` are levels. Before either filter sees the list, each
//! directive is trimmed and empty ones are dropped, so `info, starling=debug,` means
//! `info,starling=debug` on both paths.

use std::fmt;

use tracing_subscriber::filter::{Directive, EnvFilter, LevelFilter, Targets};

/// The list used when neither `--log` nor `RUST_LOG` gives one.
pub const DEFAULT_DIRECTIVES: &str = "info";

/// Where a directive list came from; named in error reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The `--log` command-line flag.
    Flag,
    /// The `RUST_LOG` environment variable.
    Env,
    /// [`DEFAULT_DIRECTIVES`].
    Default,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Flag => "--log",
            Source::Env => "RUST_LOG",
            Source::Default => "the default log directives",
        })
    }
}

/// Picks the directive list: `--log`, else `RUST_LOG`, else [`DEFAULT_DIRECTIVES`]. A blank
/// value counts as absent.
pub fn choose<'a>(flag: Option<&'a str>, env: Option<&'a str>) -> (Source, &'a str) {
    let given = |v: Option<&'a str>| v.filter(|v| !v.trim().is_empty());
    if let Some(list) = given(flag) {
        (Source::Flag, list)
    } else if let Some(list) = given(env) {
        (Source::Env, list)
    } else {
        (Source::Default, DEFAULT_DIRECTIVES)
    }
}

/// The directives of a list that failed to parse, each with the parser's reason.
#[derive(Debug, PartialEq, Eq)]
pub struct DirectiveError {
    invalid: Vec<(String, String)>,
}

impl DirectiveError {
    /// The rejected directives, in list order.
    pub fn directives(&self) -> impl Iterator<Item = &str> {
        self.invalid.iter().map(|(d, _)| d.as_str())
    }
}

impl fmt::Display for DirectiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (directive, reason)) in self.invalid.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "invalid log directive `{directive}`: {reason}")?;
        }
        Ok(())
    }
}

impl std::error::Error for DirectiveError {}

/// A parsed directive list, on the cheapest filter that reads it correctly.
// Built once per process and moved straight into the subscriber: the size gap costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum LogFilter {
    /// Only `target=level`, bare levels and bare targets.
    Targets(Targets),
    /// At least one directive names a span or a field, or leaves its level empty.
    Env(EnvFilter),
}

impl LogFilter {
    /// Parses a comma-separated directive list, reporting every invalid directive.
    pub fn parse(list: &str) -> Result<Self, DirectiveError> {
        let directives: Vec<&str> = list
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .collect();
        let invalid: Vec<(String, String)> = directives
            .iter()
            .filter_map(|d| match d.parse::<Directive>() {
                Ok(_) => None,
                Err(e) => Some((d.to_string(), e.to_string())),
            })
            .collect();
        if !invalid.is_empty() {
            return Err(DirectiveError { invalid });
        }
        if let Some(plain) = directives
            .iter()
            .map(|d| plain(d))
            .collect::<Option<Vec<_>>>()
        {
            let targets = plain
                .into_iter()
                .fold(Targets::new(), |targets, (target, level)| match target {
                    Some(target) => targets.with_target(target, level),
                    None => targets.with_default(level),
                });
            return Ok(LogFilter::Targets(targets));
        }
        EnvFilter::builder()
            .parse(directives.join(","))
            .map(LogFilter::Env)
            .map_err(|e| DirectiveError {
                invalid: vec![(directives.join(","), e.to_string())],
            })
    }

    /// `"targets"` or `"env"`: which filter the list runs on.
    pub fn kind(&self) -> &'static str {
        match self {
            LogFilter::Targets(_) => "targets",
            LogFilter::Env(_) => "env",
        }
    }
}

/// Reads one already validated, trimmed directive as `(target, level)` the way `EnvFilter`
/// does, or `None` when it is not plain: it names a span or field, leaves the level empty, or
/// uses characters outside `[A-Za-z0-9_:.-]` (left to `EnvFilter`'s reading).
fn plain(directive: &str) -> Option<(Option<&str>, LevelFilter)> {
    let start_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '-');
    let body_ok = |c: char| start_ok(c) || c == '.';
    let (name, level) = match directive.split_once('=') {
        Some((target, level)) => (target, Some(level)),
        None => (directive, None),
    };
    let mut chars = name.chars();
    if !chars.next().is_some_and(start_ok) || !chars.all(body_ok) {
        return None;
    }
    match level {
        Some(level) if level.is_empty() || !level.chars().all(body_ok) => None,
        Some(level) => Some((Some(name), level.parse().ok()?)),
        None => Some(match name.parse::<LevelFilter>() {
            Ok(level) => (None, level),
            Err(_) => (Some(name), LevelFilter::TRACE),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(list: &str) -> &'static str {
        LogFilter::parse(list).expect(list).kind()
    }

    #[test]
    fn plain_lists_use_targets() {
        for list in [
            "info",
            "info,starling_session=debug",
            "starling",
            "WARN,a::b=3,starling-x=Off",
            " info , starling=debug ,,",
            "",
        ] {
            assert_eq!(kind(list), "targets", "{list:?}");
        }
    }

    #[test]
    fn span_field_and_empty_level_lists_use_env_filter() {
        for list in [
            "[accept]=debug",
            "info,starling[{peer}]=trace",
            "starling[session{id=7}]=debug",
            "info,[{path=\"room\"}]",
            "starling=",
            "info,starling=",
        ] {
            assert_eq!(kind(list), "env", "{list:?}");
        }
    }

    #[test]
    fn invalid_directives_are_all_reported() {
        let err = LogFilter::parse("info,starling=verbose,=debug,a[b").unwrap_err();
        assert_eq!(
            err.directives().collect::<Vec<_>>(),
            ["starling=verbose", "=debug", "a[b"]
        );
        assert!(err.to_string().contains("`starling=verbose`"), "{err}");
    }

    #[test]
    fn choose_prefers_flag_then_env_then_default() {
        assert_eq!(choose(Some("debug"), Some("warn")), (Source::Flag, "debug"));
        assert_eq!(choose(None, Some("warn")), (Source::Env, "warn"));
        assert_eq!(choose(Some(" "), Some("warn")), (Source::Env, "warn"));
        assert_eq!(
            choose(None, Some("")),
            (Source::Default, DEFAULT_DIRECTIVES)
        );
    }
}
