//! Reading a compact JWS's unverified parts: the header (for `alg` and `kid`).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use crate::AuthError;

/// The JSON header of a compact token, unverified.
pub fn header(token: &str) -> Result<serde_json::Map<String, serde_json::Value>, AuthError> {
    let token = token.trim();
    let parts: Vec<&str> = token.split('.').collect();
    if parts.len() != 3 {
        return Err(AuthError::MalformedToken(format!(
            "expected 3 dot-separated parts, found {}",
            parts.len()
        )));
    }
    let bytes = URL_SAFE_NO_PAD
        .decode(parts[0])
        .map_err(|e| AuthError::MalformedToken(format!("header: {e}")))?;
    match serde_json::from_slice(&bytes) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        _ => Err(AuthError::MalformedToken(
            "header is not a JSON object".into(),
        )),
    }
}

/// The header's `kid`, if present.
pub fn kid(token: &str) -> Result<Option<String>, AuthError> {
    Ok(header(token)?
        .get("kid")
        .and_then(|kid| kid.as_str())
        .map(str::to_string))
}
