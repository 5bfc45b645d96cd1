//! [`Patch`]: a field of a PATCH body that may be left alone, cleared or
//! set.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A field of a PATCH body: absent (keep the stored value), `null` (clear
/// it, back to its default), or a value (set it). Use with
/// `#[serde(default, skip_serializing_if = "Patch::is_absent")]`; in the
/// OpenAPI document such a field is optional and nullable
/// (`#[schema(value_type = Option<T>)]`).
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Patch<T> {
    /// Not in the body: unchanged.
    #[default]
    Absent,
    /// `null`: cleared (back to the default).
    Null,
    /// A new value.
    Value(T),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Patch<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(d)? {
            None => Patch::Null,
            Some(v) => Patch::Value(v),
        })
    }
}

impl<T: Serialize> Serialize for Patch<T> {
    /// `null` or the value; an absent field is left out by
    /// `skip_serializing_if = "Patch::is_absent"` (alone, it writes `null`).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Patch::Absent | Patch::Null => s.serialize_none(),
            Patch::Value(v) => s.serialize_some(v),
        }
    }
}

impl<T> Patch<T> {
    /// Whether the field is left out of the body (unchanged).
    pub fn is_absent(&self) -> bool {
        matches!(self, Patch::Absent)
    }

    /// Applies the patch to `current`: `Absent` keeps it, `Null` gives
    /// `cleared`, a value replaces it.
    pub fn apply(self, current: T, cleared: impl FnOnce() -> T) -> T {
        match self {
            Patch::Absent => current,
            Patch::Null => cleared(),
            Patch::Value(v) => v,
        }
    }

    /// The new value of an optional field: unchanged, cleared (`None`) or set.
    pub fn apply_option(self, current: Option<T>) -> Option<T> {
        match self {
            Patch::Absent => current,
            Patch::Null => None,
            Patch::Value(v) => Some(v),
        }
    }

    /// The patch with its value mapped.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Patch<U> {
        match self {
            Patch::Absent => Patch::Absent,
            Patch::Null => Patch::Null,
            Patch::Value(v) => Patch::Value(f(v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct B {
        #[serde(default, skip_serializing_if = "Patch::is_absent")]
        n: Patch<u32>,
    }

    /// Absent, `null` and a value survive a round trip.
    #[test]
    fn absent_null_and_value_round_trip() {
        for (patch, text) in [(Patch::Absent, "{}"), (Patch::Null, r#"{"n":null}"#), (Patch::Value(3), r#"{"n":3}"#)] {
            let b = B { n: patch };
            assert_eq!(serde_json::to_string(&b).unwrap(), text);
            assert_eq!(serde_json::from_str::<B>(text).unwrap(), b);
        }
    }
}
