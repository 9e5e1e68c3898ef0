//! The OpenAI chat/completions answer as it comes over the wire: one streamed event
//! (`chat.completion.chunk`) or one whole answer (`chat.completion`, or a completions-API
//! `text`), read into borrowed structs. Every reader of an answer goes through them: the
//! load's timing loop (`client`, whose byte scanner stays its hot path and whose full reader
//! is this), the agent's stream assembler and the validator's whole-answer reader.
//!
//! The fields are lax: a field of an unexpected type does not fail the parse but is kept as
//! [`Lax::Other`] with its JSON, so that each reader decides what it means (the timing loop
//! fails the request, the validator names the field, the assembler skips it). Only text that
//! is not JSON, or an object with a known key written twice, fails [`Answer::read`]; the
//! agent parses a [`Value`] first (where the last of such keys wins) and reads it with
//! [`Answer::of`], which never fails.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{
    BorrowedStrDeserializer, MapAccessDeserializer, SeqAccessDeserializer, StrDeserializer,
    U64Deserializer,
};
use serde::de::{Deserializer, Error, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::ServerTimings;

/// One answer, streamed event or whole body; the fields neither carries are absent.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct Answer<'a> {
    /// `chat.completion` or `chat.completion.chunk`.
    pub object: Option<Lax<Str<'a>>>,
    /// The choices; the usage-only event of a stream has none.
    pub choices: Option<Lax<Vec<Lax<Choice<'a>>>>>,
    /// `usage` as sent (read it with [`Answer::usage`]); `None`: absent or null.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Value>,
    /// llama-server's `timings` as sent (read them with [`Answer::timings`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timings: Option<Value>,
    /// An error object in place of an answer; `Some(Value::Null)` when the key is there
    /// with `null`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub error: Option<Value>,
}

/// One entry of `choices`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct Choice<'a> {
    /// A streamed event's increment; `Some(Lax::Other(Value::Null))` for `"delta": null`.
    #[serde(default, deserialize_with = "present")]
    pub delta: Option<Lax<Message<'a>>>,
    /// A whole answer's message.
    pub message: Option<Lax<Message<'a>>>,
    /// The completions API's text.
    pub text: Option<Lax<Str<'a>>>,
    /// Why generation stopped; `None` while it goes on.
    pub finish_reason: Option<Lax<Str<'a>>>,
}

/// A message or one streamed increment of it (`delta`).
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct Message<'a> {
    /// The answer's text.
    pub content: Option<Lax<Str<'a>>>,
    /// Reasoning text under its newer name.
    pub reasoning: Option<Lax<Str<'a>>>,
    /// Reasoning text under its older name.
    pub reasoning_content: Option<Lax<Str<'a>>>,
    /// The tool calls (or their deltas) as sent, kept whole: the timing loop records the
    /// JSON and the agent quotes a broken one; read the parts with [`ToolCallPart::parts`].
    pub tool_calls: Option<Value>,
}

/// One tool call, or one streamed delta of it.
#[derive(Debug, Default, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct ToolCallPart<'a> {
    /// The call's position; a delta names the call it continues by it.
    pub index: Option<Lax<u64>>,
    /// The call's id (the first delta of a call carries it).
    pub id: Option<Lax<Str<'a>>>,
    /// `function`.
    #[serde(rename = "type")]
    pub kind: Option<Lax<Str<'a>>>,
    /// The function called.
    pub function: Option<Lax<Function<'a>>>,
}

/// The function of a tool call.
#[derive(Debug, Default, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct Function<'a> {
    /// The function's name (the first delta of a call carries it).
    pub name: Option<Lax<Str<'a>>>,
    /// The arguments as a JSON text, or a streamed fragment of it.
    pub arguments: Option<Lax<Str<'a>>>,
}

/// The token counts of `usage`.
#[derive(Debug, Default, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: Option<u64>,
    /// Generated tokens.
    pub completion_tokens: Option<u64>,
    /// Details of the prompt tokens.
    pub prompt_tokens_details: Option<PromptDetails>,
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Default, Deserialize)]
pub struct PromptDetails {
    /// Prompt tokens read from the prefix cache.
    pub cached_tokens: Option<u64>,
}

impl<'a> Answer<'a> {
    /// Reads one event's payload or a whole body; fails only on text that is not JSON and
    /// on a known key written twice in one object (a JSON value other than an object comes
    /// back as [`Lax::Other`]).
    pub fn read(bytes: &'a [u8]) -> serde_json::Result<Lax<Answer<'a>>> {
        serde_json::from_slice(bytes)
    }

    /// Reads an answer already parsed into a [`Value`], borrowing its strings.
    pub fn of(body: &'a Value) -> Lax<Answer<'a>> {
        Lax::deserialize(body).unwrap_or_else(|_| Lax::Other(body.clone()))
    }

    /// The token counts of `usage`; an error when a count is not an unsigned integer.
    pub fn usage(&self) -> Option<serde_json::Result<Usage>> {
        self.usage.as_ref().map(Usage::deserialize)
    }

    /// llama-server's `timings`; an error when one is not a number.
    pub fn timings(&self) -> Option<serde_json::Result<ServerTimings>> {
        self.timings.as_ref().map(ServerTimings::deserialize)
    }

    /// The error object, when the answer carries one that is not `null`.
    pub fn error(&self) -> Option<&Value> {
        self.error.as_ref().filter(|e| !e.is_null())
    }
}

impl<'a> ToolCallPart<'a> {
    /// The parts of a `tool_calls` value with each entry's JSON, or `None` when it is not
    /// an array; an entry that is not an object reads as a part without fields.
    pub fn parts(calls: &'a Value) -> Option<impl Iterator<Item = (&'a Value, ToolCallPart<'a>)>> {
        let calls = calls.as_array()?;
        Some(calls.iter().map(|call| {
            let part = match Lax::deserialize(call) {
                Ok(Lax::Typed(part)) => part,
                _ => ToolCallPart::default(),
            };
            (call, part)
        }))
    }
}

/// A field as sent: of its expected type, or any other JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum Lax<T> {
    /// The expected type.
    Typed(T),
    /// Another JSON value (`Value::Null` only where a field keeps an explicit `null`).
    Other(Value),
}

/// Reading an optional [`Lax`] field.
pub trait LaxField<T> {
    /// The value when it is there with its expected type.
    fn typed(&self) -> Option<&T>;
    /// The value, `None` when absent or `null`, or a description of the wrong value that
    /// names the field as `name`.
    fn strict(&self, name: &str) -> Result<Option<&T>, String>;
}

impl<T> LaxField<T> for Option<Lax<T>> {
    fn typed(&self) -> Option<&T> {
        match self {
            Some(Lax::Typed(t)) => Some(t),
            _ => None,
        }
    }

    fn strict(&self, name: &str) -> Result<Option<&T>, String> {
        match self {
            Some(Lax::Typed(t)) => Ok(Some(t)),
            None | Some(Lax::Other(Value::Null)) => Ok(None),
            Some(Lax::Other(v)) => Err(format!("`{name}` is {v}")),
        }
    }
}

/// A JSON string, borrowed where it has no escapes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Str<'a>(pub Cow<'a, str>);

impl Str<'_> {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for Str<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Serialize for Str<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<T: Serialize> Serialize for Lax<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Lax::Typed(t) => t.serialize(s),
            Lax::Other(v) => v.serialize(s),
        }
    }
}

/// The JSON kind a [`Lax`] field expects.
#[doc(hidden)]
#[derive(PartialEq, Eq)]
pub enum Kind {
    /// A string.
    Str,
    /// An unsigned integer.
    Uint,
    /// An object.
    Object,
    /// An array.
    Array,
}

/// A type a [`Lax`] field can hold, with the JSON kind it is read from.
#[doc(hidden)]
pub trait Shape<'de>: Deserialize<'de> {
    /// The kind.
    const KIND: Kind;
}

impl<'de: 'a, 'a> Shape<'de> for Str<'a> {
    const KIND: Kind = Kind::Str;
}
impl Shape<'_> for u64 {
    const KIND: Kind = Kind::Uint;
}
impl<'de, T: Deserialize<'de>> Shape<'de> for Vec<T> {
    const KIND: Kind = Kind::Array;
}
/// The structs are read from objects.
macro_rules! objects {
    ($($name:ident),*) => {$(
        impl<'de: 'a, 'a> Shape<'de> for $name<'a> {
            const KIND: Kind = Kind::Object;
        }
    )*};
}
objects!(Answer, Choice, Message, ToolCallPart, Function);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: Error>(self, s: &'de str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Borrowed(s)))
            }
            fn visit_str<E: Error>(self, s: &str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(s.to_string())))
            }
            fn visit_string<E: Error>(self, s: String) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de, T: Shape<'de>> Deserialize<'de> for Lax<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LaxVisitor(PhantomData))
    }
}

struct LaxVisitor<T>(PhantomData<T>);

impl<T> LaxVisitor<T> {
    /// A value of the expected kind read as `T`, any other kept as JSON.
    fn read<'de, D: Deserializer<'de>>(kind: Kind, value: D) -> Result<Lax<T>, D::Error>
    where
        T: Shape<'de>,
    {
        if T::KIND == kind {
            T::deserialize(value).map(Lax::Typed)
        } else {
            Value::deserialize(value).map(Lax::Other)
        }
    }
}

impl<'de, T: Shape<'de>> Visitor<'de> for LaxVisitor<T> {
    type Value = Lax<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: Error>(self, v: bool) -> Result<Lax<T>, E> {
        Ok(Lax::Other(Value::Bool(v)))
    }
    fn visit_i64<E: Error>(self, v: i64) -> Result<Lax<T>, E> {
        Ok(Lax::Other(Value::from(v)))
    }
    fn visit_u64<E: Error>(self, v: u64) -> Result<Lax<T>, E> {
        Self::read(Kind::Uint, U64Deserializer::new(v))
    }
    fn visit_f64<E: Error>(self, v: f64) -> Result<Lax<T>, E> {
        Ok(Lax::Other(Value::from(v)))
    }
    fn visit_borrowed_str<E: Error>(self, v: &'de str) -> Result<Lax<T>, E> {
        Self::read(Kind::Str, BorrowedStrDeserializer::new(v))
    }
    fn visit_str<E: Error>(self, v: &str) -> Result<Lax<T>, E> {
        Self::read(Kind::Str, StrDeserializer::new(v))
    }
    fn visit_string<E: Error>(self, v: String) -> Result<Lax<T>, E> {
        self.visit_str(&v)
    }
    fn visit_unit<E: Error>(self) -> Result<Lax<T>, E> {
        Ok(Lax::Other(Value::Null))
    }
    fn visit_none<E: Error>(self) -> Result<Lax<T>, E> {
        Ok(Lax::Other(Value::Null))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Lax<T>, A::Error> {
        Self::read(Kind::Object, MapAccessDeserializer::new(map))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Lax<T>, A::Error> {
        Self::read(Kind::Array, SeqAccessDeserializer::new(seq))
    }
}

/// A field whose key counts even with `null`: present is `Some`, whatever the value.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_of_another_type_are_kept_not_fatal() {
        let body = br#"{"choices":[{"delta":{"content":5,"reasoning":"a\"b","tool_calls":{}},"finish_reason":"stop"},7],"error":null}"#;
        let Lax::Typed(answer) = Answer::read(body).unwrap() else {
            panic!("an object")
        };
        assert_eq!(answer.error, Some(Value::Null));
        assert_eq!(answer.error(), None);
        let choices = answer.choices.typed().unwrap();
        assert!(matches!(choices[1], Lax::Other(Value::Number(_))));
        let Lax::Typed(choice) = &choices[0] else {
            panic!("an object")
        };
        assert_eq!(choice.finish_reason.typed().map(Str::as_str), Some("stop"));
        let delta = choice.delta.typed().unwrap();
        assert_eq!(
            delta.content.strict("content"),
            Err("`content` is 5".into())
        );
        assert_eq!(delta.reasoning.typed().map(Str::as_str), Some("a\"b"));
        assert!(ToolCallPart::parts(delta.tool_calls.as_ref().unwrap()).is_none());
        assert!(matches!(Answer::read(b"[1]").unwrap(), Lax::Other(_)));
        assert!(Answer::read(b"{\"choices\":").is_err());
    }

    #[test]
    fn null_delta_is_present_and_borrowed_from_a_value() {
        let v: Value = serde_json::from_str(
            r#"{"choices":[{"delta":null,"message":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":{}}},3]}}]}"#,
        )
        .unwrap();
        let Lax::Typed(answer) = Answer::of(&v) else {
            panic!("an object")
        };
        let choice = answer.choices.typed().unwrap()[0].clone_typed();
        assert!(matches!(choice.delta, Some(Lax::Other(Value::Null))));
        let calls = choice.message.typed().unwrap().tool_calls.as_ref().unwrap();
        let parts: Vec<_> = ToolCallPart::parts(calls).unwrap().map(|p| p.1).collect();
        assert_eq!(parts[0].index.typed(), Some(&0));
        assert!(matches!(parts[0].id.typed().unwrap().0, Cow::Borrowed("c")));
        let function = parts[0].function.typed().unwrap();
        assert!(matches!(
            function.arguments,
            Some(Lax::Other(Value::Object(_)))
        ));
        assert!(parts[1].index.is_none());
    }

    impl<'a> Lax<Choice<'a>> {
        fn clone_typed(&self) -> &Choice<'a> {
            match self {
                Lax::Typed(c) => c,
                Lax::Other(v) => panic!("{v}"),
            }
        }
    }
}
