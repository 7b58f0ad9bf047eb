//! The sliver of DER needed to move RSA keys between JWK components and PKCS#1/PKCS#8.

use crate::AuthError;

fn bad(what: &str) -> AuthError {
    AuthError::InvalidKey(format!("DER: {what}"))
}

/// Read one TLV from `input`, returning (tag, contents, rest).
fn read_tlv(input: &[u8]) -> Result<(u8, &[u8], &[u8]), AuthError> {
    let (&tag, rest) = input.split_first().ok_or_else(|| bad("truncated tag"))?;
    let (&first, mut rest) = rest.split_first().ok_or_else(|| bad("truncated length"))?;
    let len = if first < 0x80 {
        first as usize
    } else {
        let count = (first & 0x7f) as usize;
        if count == 0 || count > 4 || rest.len() < count {
            return Err(bad("bad length"));
        }
        let len = rest[..count]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | b as usize);
        rest = &rest[count..];
        len
    };
    if rest.len() < len {
        return Err(bad("truncated contents"));
    }
    Ok((tag, &rest[..len], &rest[len..]))
}

/// The unsigned big-endian integers in a SEQUENCE of INTEGERs and other elements, in order;
/// non-INTEGER elements are returned with their tag so callers can skip them.
fn sequence(input: &[u8]) -> Result<Vec<(u8, &[u8])>, AuthError> {
    let (tag, mut contents, _) = read_tlv(input)?;
    if tag != 0x30 {
        return Err(bad("expected SEQUENCE"));
    }
    let mut out = Vec::new();
    while !contents.is_empty() {
        let (tag, value, rest) = read_tlv(contents)?;
        out.push((tag, value));
        contents = rest;
    }
    Ok(out)
}

fn unsigned(value: &[u8]) -> Vec<u8> {
    let start = value.iter().position(|&b| b != 0).unwrap_or(value.len());
    value[start..].to_vec()
}

/// The eight PKCS#1 integers n, e, d, p, q, dp, dq, qi from a PKCS#8 RSA private key.
pub fn rsa_components_from_pkcs8(pkcs8: &[u8]) -> Result<[Vec<u8>; 8], AuthError> {
    let outer = sequence(pkcs8)?;
    let (_, pkcs1) = outer
        .iter()
        .find(|(tag, _)| *tag == 0x04)
        .ok_or_else(|| bad("no private key OCTET STRING"))?;
    let inner = sequence(pkcs1)?;
    let ints: Vec<Vec<u8>> = inner
        .iter()
        .filter(|(tag, _)| *tag == 0x02)
        .map(|(_, v)| unsigned(v))
        .collect();
    if ints.len() < 9 {
        return Err(bad("RSAPrivateKey needs nine integers"));
    }
    Ok(std::array::from_fn(|i| ints[i + 1].clone()))
}

fn write_len(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .iter()
            .copied()
            .skip_while(|&b| b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
}

fn write_uint(out: &mut Vec<u8>, value: &[u8]) {
    let value = unsigned(value);
    let mut body = Vec::with_capacity(value.len() + 1);
    if value.is_empty() || value[0] & 0x80 != 0 {
        body.push(0);
    }
    body.extend(value);
    out.push(0x02);
    write_len(out, body.len());
    out.extend(body);
}

/// A PKCS#1 RSAPrivateKey (two primes) from n, e, d, p, q, dp, dq, qi.
pub fn rsa_pkcs1(components: [&[u8]; 8]) -> Vec<u8> {
    let mut body = Vec::new();
    write_uint(&mut body, &[0]);
    for component in components {
        write_uint(&mut body, component);
    }
    let mut out = vec![0x30];
    write_len(&mut out, body.len());
    out.extend(body);
    out
}
