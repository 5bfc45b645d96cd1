//! Mutations: from corpus entries to new inputs. Byte-level ones for every
//! target (bit flips, interesting bytes, inserts, deletes, repeats, splices
//! between entries, tokens from a dictionary), and JSON-aware ones for the
//! targets that read JSON: a value replaced by one of another type, a huge
//! number, a long or odd Unicode string, deep nesting, a duplicate key, a
//! member added under a key the seeds use, or removed.

use serde_json::{Map, Value};

use crate::rng::Rng;

/// Bytes that matter to the parsers under test.
const BYTES: &[u8] = b"\0\x01\x1b\t\n\r \"'%+,-./0123456789:;=?@[\\]^_`{|}~\x7f\x80\xbf\xc0\xc3\xe2\xef\xf0\xff";

/// Tokens spliced into any input: numbers at the edges, JSON fragments,
/// escapes, odd Unicode, times out of range, query and header syntax.
const TOKENS: &[&str] = &[
    "0",
    "-0",
    "-1",
    "1e309",
    "-1e309",
    "1e-400",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775809",
    "4294967296",
    "65536",
    "1.7976931348623157e308",
    "0.1e1",
    "00",
    "1.",
    ".5",
    "null",
    "true",
    "false",
    "\"\"",
    "[]",
    "{}",
    "[[[[",
    "]]]]",
    "{\"\":",
    "\"a\":1,",
    ",",
    ":",
    "\"",
    "\\u0000",
    "\\ud800",
    "\\udfff",
    "\\ud83d\\ude00",
    "\\\"",
    "\\\\",
    "\\x",
    "\u{202e}",
    "\u{feff}",
    "\u{0}",
    "é",
    "\u{1F600}",
    "\u{fffd}",
    "\r\n",
    "\x1b[31m",
    "T",
    "Z",
    "+00:00",
    "9999-12-31T23:59:59Z",
    "0000-01-01T00:00:00Z",
    "+275760-09-13T00:00:00Z",
    "2026-02-30T00:00:00Z",
    "2026-11-26T09:30:00.123456789Z",
    "%",
    "%2",
    "%zz",
    "%00",
    "%0A",
    "%ff",
    "%c3%a9",
    "%2F",
    "+",
    "&",
    "=",
    "&&",
    "==",
    "v1,",
    "v1a,",
    "v2,",
    " v1,",
    "whsec_",
    "c1\n",
    "tev_",
    "evt_",
    "sub_",
    "hookline.",
    "*",
    "**",
    ".*",
    "a.*",
    "[REDACTED]",
    "password",
    "token",
    "Authorization",
    "api_key",
    "secret",
];

/// A long string for the JSON mutations.
fn long_string(rng: &mut Rng) -> String {
    let unit = *rng.pick(&["a", "é", "\u{1F600}", "\\", "\"", "\u{0}", ".", "*", "%41"]);
    unit.repeat(1 + rng.below(20_000))
}

/// Applies 1 to 4 byte-level mutations to `data` (another corpus entry,
/// `other`, for splices), keeping it at most `max_len` bytes.
pub fn bytes(rng: &mut Rng, data: &mut Vec<u8>, other: &[u8], max_len: usize) {
    for _ in 0..1 + rng.below(4) {
        match rng.below(10) {
            0 if !data.is_empty() => {
                let i = rng.below(data.len());
                data[i] ^= 1 << rng.below(8);
            }
            1 if !data.is_empty() => {
                let i = rng.below(data.len());
                data[i] = *rng.pick(BYTES);
            }
            2 => {
                let i = rng.below(data.len() + 1);
                let n = 1 + rng.below(8);
                let new: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                data.splice(i..i, new);
            }
            3 if !data.is_empty() => {
                let i = rng.below(data.len());
                let n = 1 + rng.below((data.len() - i).min(32));
                data.drain(i..i + n);
            }
            4 if !data.is_empty() => {
                // Repeat a chunk, up to many times (long runs, deep nesting).
                let i = rng.below(data.len());
                let n = 1 + rng.below((data.len() - i).min(16));
                let chunk = data[i..i + n].to_vec();
                let times = if rng.one_in(8) { 1 + rng.below(2000) } else { 1 + rng.below(4) };
                let at = i + n;
                let repeated: Vec<u8> = chunk.iter().copied().cycle().take(chunk.len() * times).collect();
                data.splice(at..at, repeated);
            }
            5 if !other.is_empty() => {
                // Splice: a prefix of this entry and a suffix of the other.
                let cut = rng.below(data.len() + 1);
                let from = rng.below(other.len());
                data.truncate(cut);
                data.extend_from_slice(&other[from..]);
            }
            6 if !other.is_empty() => {
                // Insert a piece of the other entry.
                let from = rng.below(other.len());
                let n = 1 + rng.below((other.len() - from).min(64));
                let i = rng.below(data.len() + 1);
                data.splice(i..i, other[from..from + n].iter().copied());
            }
            7 | 8 => {
                let i = rng.below(data.len() + 1);
                let t = rng.pick(TOKENS).as_bytes();
                if rng.one_in(2) && i < data.len() {
                    // Overwrite instead of insert.
                    let end = (i + t.len()).min(data.len());
                    data.splice(i..end, t.iter().copied());
                } else {
                    data.splice(i..i, t.iter().copied());
                }
            }
            _ if !data.is_empty() => {
                let n = rng.below(data.len());
                data.truncate(n);
            }
            _ => data.push(rng.next_u64() as u8),
        }
    }
    data.truncate(max_len);
}

/// Placeholder for raw JSON text that a [`Value`] cannot hold (huge
/// numbers, deep nesting, duplicate keys), put in the serialized text in
/// place of the quoted placeholder.
const RAW: &str = "\u{1}hookline-fuzz-raw\u{1}";

/// A JSON-aware mutation of `data` when it parses as JSON (else `false`,
/// nothing changed): one node of the document replaced, removed or given a
/// sibling, then serialized (compact or pretty), at most `max_len` bytes.
/// `keys` are object keys seen in the seeds.
pub fn json(rng: &mut Rng, data: &mut Vec<u8>, keys: &[String], max_len: usize) -> bool {
    let Ok(mut doc) = serde_json::from_slice::<Value>(data) else { return false };
    let mut raw = None;
    let count = nodes(&doc);
    let target = rng.below(count);
    let mut seen = 0;
    let mut replacement = |rng: &mut Rng, old: &Value| -> Value {
        match rng.below(12) {
            0 => Value::Null,
            1 => Value::Bool(rng.one_in(2)),
            2 => Value::from(rng.next_u64() as i64),
            3 => serde_json::Number::from_f64(f64::from_bits(rng.next_u64())).map_or(Value::Null, Value::Number),
            4 => Value::String(long_string(rng)),
            5 => Value::String(rng.pick(TOKENS).to_string()),
            6 => Value::Array(vec![old.clone(); rng.below(4)]),
            7 => {
                let mut m = Map::new();
                if !keys.is_empty() {
                    m.insert(rng.pick(keys).clone(), old.clone());
                }
                Value::Object(m)
            }
            8 => {
                // A number no integer or float holds, or at the edges.
                raw = Some(
                    rng.pick(&[
                        "18446744073709551616",
                        "-9223372036854775809",
                        "1e309",
                        "123456789012345678901234567890123456789",
                        "1e-400",
                        "-0.0",
                        "4.9e-324",
                    ])
                    .to_string(),
                );
                Value::String(RAW.into())
            }
            9 => {
                // Deep nesting around the old value.
                let depth = 1 + rng.below(300);
                let (open, close) = if rng.one_in(2) { ("[", "]") } else { ("{\"a\":", "}") };
                let inner = serde_json::to_string(old).unwrap_or_default();
                raw = Some(format!("{}{inner}{}", open.repeat(depth), close.repeat(depth)));
                Value::String(RAW.into())
            }
            10 if !keys.is_empty() => {
                // A duplicate key right after this value: `old, "k": v`.
                let inner = serde_json::to_string(old).unwrap_or_default();
                let key = serde_json::to_string(rng.pick(keys)).unwrap_or_default();
                raw = Some(format!("{inner},{key}:{}", if rng.one_in(2) { "null".into() } else { inner.clone() }));
                Value::String(RAW.into())
            }
            _ => Value::String(
                rng.pick(&["", " ", "\u{0}", "\u{1b}[2J", "\u{202e}x", "\u{1F600}", "a\nb", "日本語", "\u{fffd}"])
                    .to_string(),
            ),
        }
    };
    visit(
        &mut doc,
        &mut |v: &mut Value, rng: &mut Rng| {
            if seen == target {
                match (v, rng.below(4)) {
                    (Value::Object(m), 0) if !m.is_empty() => {
                        let k = m.keys().nth(rng.below(m.len())).cloned().unwrap_or_default();
                        m.remove(&k);
                    }
                    (Value::Object(m), 1) if !keys.is_empty() => {
                        let k = rng.pick(keys).clone();
                        let new = replacement(rng, &Value::Null);
                        m.insert(k, new);
                    }
                    (Value::Array(a), 0) if !a.is_empty() => {
                        a.remove(rng.below(a.len()));
                    }
                    (v, _) => {
                        let new = replacement(rng, v);
                        *v = new;
                    }
                }
            }
            seen += 1;
        },
        rng,
    );
    let text = if rng.one_in(4) { serde_json::to_string_pretty(&doc) } else { serde_json::to_string(&doc) };
    let Ok(mut text) = text else { return false };
    if let Some(raw) = raw {
        let quoted = serde_json::to_string(RAW).unwrap_or_default();
        text = text.replacen(&quoted, &raw, 1);
    }
    data.clear();
    data.extend_from_slice(text.as_bytes());
    data.truncate(max_len);
    true
}

/// Nodes of a document (values, containers included).
fn nodes(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(nodes).sum(),
        Value::Object(m) => m.values().map(nodes).sum(),
        _ => 0,
    }
}

/// Calls `f` on every node, in document order, containers first.
fn visit(v: &mut Value, f: &mut dyn FnMut(&mut Value, &mut Rng), rng: &mut Rng) {
    f(v, rng);
    match v {
        Value::Array(a) => a.iter_mut().for_each(|x| visit(x, f, rng)),
        Value::Object(m) => m.values_mut().for_each(|x| visit(x, f, rng)),
        _ => {}
    }
}

/// Every object key in `doc`, for the dictionary of [`json`].
pub fn keys_of(doc: &Value, out: &mut Vec<String>) {
    match doc {
        Value::Array(a) => a.iter().for_each(|x| keys_of(x, out)),
        Value::Object(m) => {
            for (k, v) in m {
                if !out.contains(k) {
                    out.push(k.clone());
                }
                keys_of(v, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_deterministic_and_bounded() {
        let seed = br#"{"id":"evt_1","type":"order.created","data":{"n":[1,2,{"k":"v"}]}}"#.to_vec();
        let keys = vec!["id".to_string(), "type".to_string()];
        let run = |s: u64| {
            let mut rng = Rng::new(s);
            (0..500)
                .map(|_| {
                    let mut d = seed.clone();
                    if !json(&mut rng, &mut d, &keys, 4096) {
                        bytes(&mut rng, &mut d, &seed, 4096);
                    }
                    bytes(&mut rng, &mut d, &seed, 4096);
                    d
                })
                .collect::<Vec<_>>()
        };
        let a = run(1);
        assert_eq!(a, run(1));
        assert_ne!(a, run(2));
        assert!(a.iter().all(|d| d.len() <= 4096));
        let distinct: std::collections::BTreeSet<_> = a.iter().collect();
        assert!(distinct.len() > 400, "mutations should vary: {}", distinct.len());
    }

    #[test]
    fn json_mutations_reach_every_shape() {
        let seed = br#"{"a":{"b":[1,"x",null]},"c":true}"#.to_vec();
        let keys = vec!["a".to_string(), "zz".to_string()];
        let mut rng = Rng::new(3);
        let (mut invalid, mut nested, mut dup) = (0, 0, 0);
        for _ in 0..2000 {
            let mut d = seed.clone();
            assert!(json(&mut rng, &mut d, &keys, 1 << 20));
            let text = String::from_utf8(d).unwrap();
            if serde_json::from_str::<Value>(&text).is_err() {
                invalid += 1;
            }
            if text.contains("[[[[[") || text.contains("{\"a\":{\"a\":{\"a\":") {
                nested += 1;
            }
            if text.matches("\"a\":").count() > 1 || text.matches("\"zz\":").count() > 1 {
                dup += 1;
            }
        }
        assert!(invalid > 0 && nested > 0 && dup > 0, "invalid {invalid}, nested {nested}, duplicate keys {dup}");
    }
}
