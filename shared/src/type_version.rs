//! Versioned event types (docs/formats.md#event-catalog): a type whose
//! last segment is `v<N>` (N ≥ 2) is major version N of the type before it.
//! Pure and without imports, so that routing, subscription patterns and the
//! catalog all read versions one way.

/// The major version of a versioned type: its last segment is `v<N>` with
/// N ≥ 2 (no leading zero) after at least one other segment;
/// `task.succeeded.v2` is version 2 of `task.succeeded`. Version 1 is the
/// bare type (docs/formats.md#event-catalog). Wildcards (`task.*`, `*`) do
/// not match a versioned type: a subscriber asks for the version
/// (`task.*.v2`, `*.v2`, or the exact type), so a breaking version never
/// reaches it by surprise.
pub fn version_of(event_type: &str) -> Option<(&str, u32)> {
    let (base, last) = event_type.rsplit_once('.')?;
    let digits = last.strip_prefix('v')?;
    if base.is_empty() || digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u32 = digits.parse().ok()?;
    (n >= 2).then_some((base, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_last_segment_v2_and_up_is_a_version() {
        assert_eq!(version_of("task.succeeded.v2"), Some(("task.succeeded", 2)));
        assert_eq!(version_of("a.v10"), Some(("a", 10)));
        for not in ["task.succeeded", "task.v1", "task.v02", "v2", "task.vx", "task.v", ".v2", "a.v99999999999"] {
            assert_eq!(version_of(not), None, "{not}");
        }
    }
}
