//! Byte sizes in configs: a whole number of bytes, or a string with a binary
//! suffix: `k`/`m`/`g`/`t` (as fio reads them with its default
//! `kb_base=1024`) or `KiB`/`MiB`/`GiB`/`TiB` (IEC), all powers of 1024, and
//! `b` for bytes.
//!
//! `kb`/`mb`/`gb`/`tb` are refused: fio's default reads `10GB` as 10 × 2³⁰
//! bytes, its `kb_base=1000` and SI as 10 × 10⁹, and `hvio serve`'s config
//! (as disk makers do) as 10⁹ multiples; `ki`/`mi`/... are refused too, as
//! fio's documentation reads `1mi` as 10⁶ and fio itself as 2²⁰. Which one a
//! writer meant cannot be told, so a config must say it unambiguously.

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A size in bytes, written in a config as a number of bytes or a string with a unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Size(pub u64);

impl Size {
    /// Bytes.
    pub fn bytes(self) -> u64 {
        self.0
    }
    /// 512-byte sectors (rounded down).
    pub fn sectors(self) -> u64 {
        self.0 / hvio_core::SECTOR_BYTES
    }
}

/// Parse `4k`, `16KiB`, `1g`, `512`, `1.5GiB`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("`{text}` is not a size (expected e.g. 4096, 4k, 16KiB, 12GiB)"));
    }
    let n: f64 = num.parse().map_err(|_| format!("`{text}` is not a size"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        u @ ("kb" | "mb" | "gb" | "tb" | "ki" | "mi" | "gi" | "ti") => {
            let p = &u[..1];
            return Err(format!(
                "`{text}`: `{}` is ambiguous (fio's default kb_base=1024 reads it as a power of 1024, SI and kb_base=1000 as a power of 1000): write {num}{}iB or {num}{p} for powers of 1024, or the number of bytes",
                unit.trim(),
                p.to_ascii_uppercase()
            ));
        }
        other => {
            return Err(format!(
                "`{text}`: unknown size unit `{other}` (use k, m, g, t or KiB, MiB, GiB, TiB)"
            ))
        }
    };
    let too_big = || format!("`{text}` is too large (at most 2^64 - 1 bytes)");
    if !num.contains('.') {
        // Whole numbers exactly, without a detour through f64.
        let n: u64 = num.parse().map_err(|_| too_big())?;
        return n.checked_mul(mult).ok_or_else(too_big);
    }
    let v = n * mult as f64;
    if v.fract() != 0.0 {
        return Err(format!("`{text}` is not a whole number of bytes"));
    }
    // 2^64 is the first f64 past u64::MAX.
    if v >= 18_446_744_073_709_551_616.0 {
        return Err(too_big());
    }
    Ok(v as u64)
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a size in bytes or a string like \"4k\" or \"12GiB\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Size, E> {
                Ok(Size(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Size, E> {
                u64::try_from(v)
                    .map(Size)
                    .map_err(|_| E::custom(format!("size {v} is negative")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Size, E> {
                if v >= 0.0 && v.fract() == 0.0 && v < 18_446_744_073_709_551_616.0 {
                    Ok(Size(v as u64))
                } else {
                    Err(E::custom(format!(
                        "size {v} is not a whole number of bytes from 0 to 2^64 - 1"
                    )))
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Size, E> {
                parse_size(v).map(Size).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// `[[vm]] reshape = { ... }`: [`hvio_reshape::ReshapeConfig`], whose
/// `*_bytes` keys take size strings here as every size of the config does.
pub(crate) fn reshape_keys<'de, D: Deserializer<'de>>(d: D) -> Result<Option<hvio_reshape::ReshapeConfig>, D::Error> {
    let mut table = toml::Table::deserialize(d)?;
    for (key, value) in table.iter_mut() {
        if let (true, toml::Value::String(text)) = (key.ends_with("_bytes"), &*value) {
            let bytes = parse_size(text).map_err(|e| de::Error::custom(format!("reshape.{key}: {e}")))?;
            let bytes = i64::try_from(bytes).map_err(|_| {
                de::Error::custom(format!("reshape.{key}: `{text}` is too large (at most 2^63 - 1 bytes)"))
            })?;
            *value = toml::Value::Integer(bytes);
        }
    }
    toml::Value::Table(table)
        .try_into::<hvio_reshape::ReshapeConfig>()
        .map(Some)
        .map_err(|e| de::Error::custom(format!("reshape: {e}")))
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn sizes() {
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("16KiB").unwrap(), 16384);
        assert_eq!(parse_size("12GiB").unwrap(), 12 << 30);
        assert_eq!(parse_size("1.5k").unwrap(), 1536);
        assert_eq!(parse_size("512").unwrap(), 512);
        assert!(parse_size("4q").is_err());
        assert_eq!(parse_size("10 GiB").unwrap(), 10 << 30);
        assert_eq!(parse_size("10g").unwrap(), 10 << 30);
        // SI-looking units are refused, never read as powers of 1024.
        for ambiguous in ["10 GB", "10GB", "4kb", "1mi", "2TB"] {
            let e = parse_size(ambiguous).unwrap_err();
            assert!(e.contains("ambiguous") && e.contains("iB"), "{ambiguous}: {e}");
        }
        assert!(parse_size("10 GB").unwrap_err().contains("10GiB or 10g"));
        assert!(parse_size("k").is_err());
        assert!(parse_size("-4k").is_err());
        // Past u64: an error, not a silent 2^64 - 1; whole numbers exactly.
        assert_eq!(parse_size("16777215TiB").unwrap(), 16_777_215 << 40);
        assert_eq!(parse_size("18446744073709551615").unwrap(), u64::MAX);
        assert_eq!(parse_size("9007199254740993").unwrap(), 9_007_199_254_740_993);
        for big in [
            "16777216TiB",
            "18446744073709551616",
            "99999999999999999999",
            "16777216.0t",
        ] {
            assert!(parse_size(big).unwrap_err().contains("too large"), "{big}");
        }
    }
}
