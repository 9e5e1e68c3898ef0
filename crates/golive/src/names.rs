//! Closed sets of names (checklist items, agent problem codes, acceptance check ids,
//! fabrics, strategies) as enums that serde and strum both write as their snake_case
//! names, so a misspelt name is a compile error and the written form stays the string.

/// Declares such an enum with `as_str()`. Variants may carry doc comments and their own
/// `#[serde(rename = ...)]` / `#[strum(serialize = ...)]` where snake_case would split
/// differently (`invalid_request_5xx`).
macro_rules! snake_case_names {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($body:tt)* }) => {
        $(#[$meta])*
        #[derive(
            Debug,
            Clone,
            Copy,
            PartialEq,
            Eq,
            Hash,
            PartialOrd,
            Ord,
            serde::Serialize,
            serde::Deserialize,
            strum::Display,
            strum::EnumString,
            strum::IntoStaticStr,
            strum::EnumIter,
        )]
        #[serde(rename_all = "snake_case")]
        #[strum(serialize_all = "snake_case")]
        $vis enum $name { $($body)* }

        impl $name {
            /// The name as reports write it.
            pub fn as_str(self) -> &'static str {
                self.into()
            }
        }
    };
}
pub(crate) use snake_case_names;

/// Test helper: serde, `Display`, `FromStr` and `as_str` agree on every variant, and
/// every name is snake_case.
#[cfg(test)]
pub(crate) fn assert_round_trip<T>()
where
    T: strum::IntoEnumIterator
        + serde::Serialize
        + std::fmt::Display
        + std::str::FromStr
        + Into<&'static str>
        + PartialEq
        + std::fmt::Debug
        + Copy,
    <T as std::str::FromStr>::Err: std::fmt::Debug,
{
    let mut n = 0;
    for v in T::iter() {
        let name: &'static str = v.into();
        let json = serde_json::to_value(v).unwrap();
        assert_eq!(json.as_str(), Some(name), "{v:?}");
        assert_eq!(v.to_string(), name);
        assert_eq!(name.parse::<T>().unwrap(), v);
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "{name}"
        );
        n += 1;
    }
    assert!(n > 0);
}
