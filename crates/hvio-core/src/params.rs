//! Tunables as data: each scheduler or device publishes a table of
//! [`ParamSpec`]s with Linux names, defaults and units; a run supplies
//! overrides by name, and [`Params::resolve`] checks them.
//!
//! A bad value is an error naming the field, never a silent clamp.

use crate::error::ConfigError;
use crate::time::{Nanos, NS_PER_MS, NS_PER_S, NS_PER_US};
use std::collections::BTreeMap;

/// One tunable: its Linux name (where Linux has one), default, unit and range.
#[derive(Debug, Clone, Copy)]
pub struct ParamSpec {
    /// The name (Linux's sysfs name where Linux has the tunable).
    pub name: &'static str,
    /// The value used when none is given.
    pub default: f64,
    /// `ms`, `us`, `s`, `sectors`, `requests`, `bool`, `ratio`, `count`, ...
    pub unit: &'static str,
    /// The smallest value accepted.
    pub min: f64,
    /// The largest value accepted.
    pub max: f64,
    /// Whole numbers only (Linux sysfs tunables are integers).
    pub integer: bool,
    /// One line on what it does.
    pub doc: &'static str,
}

impl ParamSpec {
    /// An integer tunable.
    pub const fn int(
        name: &'static str,
        default: f64,
        unit: &'static str,
        min: f64,
        max: f64,
        doc: &'static str,
    ) -> Self {
        ParamSpec {
            name,
            default,
            unit,
            min,
            max,
            integer: true,
            doc,
        }
    }
    /// A real-valued tunable.
    pub const fn real(
        name: &'static str,
        default: f64,
        unit: &'static str,
        min: f64,
        max: f64,
        doc: &'static str,
    ) -> Self {
        ParamSpec {
            name,
            default,
            unit,
            min,
            max,
            integer: false,
            doc,
        }
    }
    /// A 0/1 switch, as Linux sysfs shows booleans.
    pub const fn flag(name: &'static str, default: bool, doc: &'static str) -> Self {
        ParamSpec {
            name,
            default: if default { 1.0 } else { 0.0 },
            unit: "bool",
            min: 0.0,
            max: 1.0,
            integer: true,
            doc,
        }
    }
}

/// User-supplied overrides, by name.
pub type ParamValues = BTreeMap<String, f64>;

/// A resolved parameter set: every spec's value, defaults filled in.
#[derive(Debug, Clone)]
pub struct Params {
    specs: &'static [ParamSpec],
    values: Vec<f64>,
    /// Which tunables the overrides named, even with the default value.
    set: Vec<bool>,
}

impl Params {
    /// Check `overrides` against `specs`: unknown names, non-finite values,
    /// values out of range and fractions for integer tunables are errors that
    /// name the key and the value. `context` says whose parameters these are.
    pub fn resolve(context: &str, specs: &'static [ParamSpec], overrides: &ParamValues) -> Result<Params, ConfigError> {
        let mut values: Vec<f64> = specs.iter().map(|s| s.default).collect();
        let mut set = vec![false; specs.len()];
        for (key, &value) in overrides {
            let Some(i) = specs.iter().position(|s| s.name == key) else {
                return Err(ConfigError::UnknownKey {
                    context: context.to_string(),
                    key: key.clone(),
                    known: specs.iter().map(|s| s.name).collect::<Vec<_>>().join(", "),
                });
            };
            let spec = &specs[i];
            if !value.is_finite() {
                return Err(ConfigError::invalid(context, key, value, "must be a finite number"));
            }
            if spec.integer && value.fract() != 0.0 {
                return Err(ConfigError::invalid(context, key, value, "must be a whole number"));
            }
            if value < spec.min || value > spec.max {
                return Err(ConfigError::invalid(
                    context,
                    key,
                    value,
                    format!("must be between {} and {} {}", spec.min, spec.max, spec.unit),
                ));
            }
            values[i] = value;
            set[i] = true;
        }
        Ok(Params { specs, values, set })
    }

    /// Defaults only.
    pub fn defaults(specs: &'static [ParamSpec]) -> Params {
        Params {
            specs,
            values: specs.iter().map(|s| s.default).collect(),
            set: vec![false; specs.len()],
        }
    }

    /// Whether the overrides named `name`, even with its default value (a
    /// sysfs write of the default is still a write: Linux CFQ's
    /// `cfq_registered_queue` zeroes `slice_idle` on non-rotational devices
    /// at registration, and a later write of 8 brings it back).
    pub fn is_set(&self, name: &str) -> bool {
        self.set[self.index(name)]
    }

    fn index(&self, name: &str) -> usize {
        // A missing name is a programming error in the scheduler, not user input.
        self.specs
            .iter()
            .position(|s| s.name == name)
            .unwrap_or_else(|| panic!("parameter `{name}` is not in its own table"))
    }

    /// The value of tunable `name` (panics on a name outside the table: a scheduler's own bug).
    pub fn get(&self, name: &str) -> f64 {
        self.values[self.index(name)]
    }

    /// The value of tunable `name` as a whole number.
    pub fn u64(&self, name: &str) -> u64 {
        self.get(name) as u64
    }

    /// Tunable `name` read as a flag (non-zero is true).
    pub fn flag(&self, name: &str) -> bool {
        self.get(name) != 0.0
    }

    /// A time tunable converted to nanoseconds according to its unit.
    pub fn nanos(&self, name: &str) -> Nanos {
        let i = self.index(name);
        let v = self.values[i];
        let scale = match self.specs[i].unit {
            "ns" => 1.0,
            "us" => NS_PER_US as f64,
            "ms" => NS_PER_MS as f64,
            "s" => NS_PER_S as f64,
            other => panic!("parameter `{name}` has unit `{other}`, not a time"),
        };
        (v * scale).round() as Nanos
    }

    /// All values by name, in table order (for reports).
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, f64)> + '_ {
        self.specs.iter().zip(&self.values).map(|(s, &v)| (s.name, v))
    }

    /// The table this set follows.
    pub fn specs(&self) -> &'static [ParamSpec] {
        self.specs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static SPECS: &[ParamSpec] = &[
        ParamSpec::int("fifo_batch", 16.0, "requests", 1.0, 4096.0, "batch"),
        ParamSpec::int("read_expire", 500.0, "ms", 0.0, 1e7, "read deadline"),
        ParamSpec::flag("front_merges", true, "merge"),
    ];

    #[test]
    fn defaults_and_overrides() {
        let mut o = ParamValues::new();
        o.insert("fifo_batch".into(), 8.0);
        let p = Params::resolve("scheduler deadline", SPECS, &o).unwrap();
        assert_eq!(p.u64("fifo_batch"), 8);
        assert_eq!(p.nanos("read_expire"), 500 * NS_PER_MS);
        assert!(p.flag("front_merges"));
    }

    #[test]
    fn is_set_tells_an_explicit_default_from_none() {
        let mut o = ParamValues::new();
        o.insert("read_expire".into(), 500.0);
        let p = Params::resolve("scheduler deadline", SPECS, &o).unwrap();
        assert!(p.is_set("read_expire"), "named with its default value");
        assert!(!p.is_set("fifo_batch"));
        assert_eq!(p.get("read_expire"), Params::defaults(SPECS).get("read_expire"));
        assert!(!Params::defaults(SPECS).is_set("read_expire"));
    }

    #[test]
    fn errors_name_key_and_value() {
        let mut o = ParamValues::new();
        o.insert("fifo_bach".into(), 8.0);
        let e = Params::resolve("scheduler deadline", SPECS, &o)
            .unwrap_err()
            .to_string();
        assert!(e.contains("fifo_bach") && e.contains("scheduler deadline"), "{e}");
        let mut o = ParamValues::new();
        o.insert("fifo_batch".into(), 0.0);
        let e = Params::resolve("scheduler deadline", SPECS, &o)
            .unwrap_err()
            .to_string();
        assert!(e.contains("fifo_batch") && e.contains('0'), "{e}");
        let mut o = ParamValues::new();
        o.insert("fifo_batch".into(), 2.5);
        assert!(Params::resolve("x", SPECS, &o).is_err());
    }
}
