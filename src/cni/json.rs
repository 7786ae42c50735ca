//! Strict JSON decoding for stdin. serde_json keeps the last of duplicate keys;
//! a config with `"trafficClass": 41, "trafficClass": 0` is ambiguous, so it is
//! refused instead of silently taking one of them.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// Decode `bytes` as one JSON value, refusing duplicate object keys.
pub fn from_slice(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let v = StrictValue.deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// A string field of an object: absent or null is `None`; another type is
/// `Err` with the value found, for the caller's message (config and result
/// both read their string fields through this).
pub fn str_field<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, &'a Value> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(other),
    }
}

struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(StrictValue)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format!("duplicate key {key:?}")));
            }
            let v = map.next_value_seed(StrictValue)?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        assert!(from_slice(br#"{"a":1,"a":2}"#)
            .unwrap_err()
            .to_string()
            .contains("duplicate key \"a\""));
        assert!(from_slice(br#"{"p":{"x":[{"k":1,"k":1}]}}"#).is_err());
        assert_eq!(
            from_slice(br#"{"a":1,"b":[true,null,"s",-2,1.5]}"#).unwrap()["b"][3],
            -2
        );
    }

    #[test]
    fn trailing_garbage_and_deep_nesting_are_errors_not_panics() {
        assert!(from_slice(br#"{} x"#).is_err());
        let deep = "[".repeat(100_000);
        assert!(from_slice(deep.as_bytes()).is_err());
        assert!(from_slice(&[0xff, 0xfe]).is_err());
    }
}
