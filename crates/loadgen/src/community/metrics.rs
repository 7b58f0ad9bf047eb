//! The relay's access decisions, read from its Prometheus endpoint before and after the
//! measured window: every `starling_auth_*` counter (cache lookups by result and reason,
//! auth-server requests by event, revalidations), as a rate over the window.

use std::collections::BTreeMap;

use url::Url;

use crate::http_fetch::FetchError;

/// The series scraped.
const PREFIX: &str = "starling_auth_";

/// Every `starling_auth_*` sample in a Prometheus text exposition, by series (name and
/// labels as written).
pub fn parse(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|line| line.starts_with(PREFIX))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// Per-second increase of each counter (`*_total`) over `secs`; unchanged ones are left out.
pub fn rates(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
    secs: f64,
) -> BTreeMap<String, f64> {
    if secs <= 0.0 {
        return BTreeMap::new();
    }
    after
        .iter()
        .filter(|(series, _)| {
            series
                .split('{')
                .next()
                .is_some_and(|name| name.ends_with("_total"))
        })
        .filter_map(|(series, &value)| {
            let delta = value - before.get(series).copied().unwrap_or(0.0);
            (delta > 0.0).then(|| (series.clone(), delta / secs))
        })
        .collect()
}

/// GET `url` and parse it.
pub async fn scrape(
    client: &reqwest::Client,
    url: &Url,
) -> Result<BTreeMap<String, f64>, FetchError> {
    let response = client.get(url.clone()).send().await?;
    let status = response.status();
    if !status.is_success() {
        return Err(FetchError::Status(status.as_u16()));
    }
    Ok(parse(&response.text().await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_counters_become_rates_over_the_window() {
        let before = parse(
            "# HELP starling_auth_cache_lookups_total Lookups\n\
             starling_auth_cache_lookups_total{result=\"hit\",reason=\"fresh\"} 10\n\
             starling_sessions 4\n",
        );
        let after = parse(
            "starling_auth_cache_lookups_total{result=\"hit\",reason=\"fresh\"} 30\n\
             starling_auth_cache_lookups_total{result=\"miss\",reason=\"cold\"} 8\n\
             starling_auth_cache_entries 5\n\
             starling_sessions 9\n",
        );
        let rates = rates(&before, &after, 2.0);
        assert_eq!(
            rates.get("starling_auth_cache_lookups_total{result=\"hit\",reason=\"fresh\"}"),
            Some(&10.0)
        );
        assert_eq!(
            rates.get("starling_auth_cache_lookups_total{result=\"miss\",reason=\"cold\"}"),
            Some(&4.0)
        );
        assert!(!rates.keys().any(|k| k.starts_with("starling_sessions")));
        // A gauge is not a rate.
        assert!(!rates.contains_key("starling_auth_cache_entries"));
    }
}
