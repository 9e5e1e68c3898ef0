//! `--cases FILE`: the vendor verifier's public case format, JSONL with one chat
//! completion request body per line (`messages`, `tools`, sampling fields, ...).

use anyhow::Context;
use serde_json::{Map, Value};

/// One case: its line number and the request body.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// Its line in the file, 1-based.
    pub line: usize,
    /// The chat completion request body, as written.
    pub body: Map<String, Value>,
}

/// Parses JSONL cases; blank lines are skipped, and a line that is not a JSON object
/// with a `messages` array is an error naming the line.
pub fn parse(text: &str) -> anyhow::Result<Vec<Case>> {
    let mut cases = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line)
            .with_context(|| format!("case line {line_no} is not JSON"))?;
        let Value::Object(body) = value else {
            anyhow::bail!("case line {line_no} is not a JSON object");
        };
        if !body.get("messages").is_some_and(Value::is_array) {
            anyhow::bail!("case line {line_no} has no `messages` array");
        }
        cases.push(Case {
            line: line_no,
            body,
        });
    }
    Ok(cases)
}

impl Case {
    /// The case declares tools (top-level `tools` or, dynamically, in a message).
    pub fn has_tools(&self) -> bool {
        let top = self
            .body
            .get("tools")
            .and_then(Value::as_array)
            .is_some_and(|t| !t.is_empty());
        let dynamic = self.body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|msg| msg.get("tools").is_some()));
        top || dynamic
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_request_bodies_and_names_bad_lines() {
        let text = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}\n\n{\"messages\":[]}\n";
        let cases = parse(text).unwrap();
        assert_eq!(cases.len(), 2);
        assert_eq!(cases[1].line, 3);
        assert!(cases[0].has_tools());
        assert!(!cases[1].has_tools());
        let err = parse("{\"messages\":[]}\n[1]\n").unwrap_err().to_string();
        assert!(err.contains("line 2"), "{err}");
        let err = parse("{\"model\":\"x\"}").unwrap_err().to_string();
        assert!(err.contains("messages"), "{err}");
    }
}
