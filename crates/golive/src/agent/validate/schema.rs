//! What the request offered and asked for (tools, `tool_choice`), JSON Schema checks of
//! arguments and structured output, and quoting model text into findings.

use serde_json::Value;

/// The offered tools of a request: name -> parameter schema.
pub fn offered_tools(request: &Value) -> Vec<(String, Value)> {
    request
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| {
                    let f = t.get("function")?;
                    let name = f.get("name")?.as_str()?.to_string();
                    let params = f
                        .get("parameters")
                        .cloned()
                        .unwrap_or_else(|| serde_json::json!({"type": "object"}));
                    Some((name, params))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `tool_choice` of a request: `required`, a named function, or free.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolChoice {
    /// `auto`, `none` or absent: the model may answer either way.
    Free,
    /// `required`: some tool call must come.
    Required,
    /// A named function: a call to it must come.
    Named(String),
}

/// The `tool_choice` of `request`.
pub fn tool_choice(request: &Value) -> ToolChoice {
    match request.get("tool_choice") {
        Some(Value::String(s)) if s == "required" => ToolChoice::Required,
        Some(obj @ Value::Object(_)) => obj
            .pointer("/function/name")
            .and_then(Value::as_str)
            .map(|n| ToolChoice::Named(n.to_string()))
            .unwrap_or(ToolChoice::Free),
        _ => ToolChoice::Free,
    }
}

/// Validates `instance` against a JSON Schema; `Err` lists the violations, or says the schema is unusable.
/// External `$ref`s are never fetched.
pub fn schema_errors(schema: &Value, instance: &Value) -> Result<Vec<String>, String> {
    struct NoFetch;
    impl jsonschema::Retrieve for NoFetch {
        fn retrieve(
            &self,
            uri: &jsonschema::Uri<String>,
        ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
            Err(format!("external schema {uri} is not fetched").into())
        }
    }
    let validator = jsonschema::options()
        .with_retriever(NoFetch)
        .build(schema)
        .map_err(|e| format!("the schema itself is invalid: {e}"))?;
    Ok(validator
        .iter_errors(instance)
        .take(5)
        .map(|e| {
            // The offending value is quoted so that `--no-content` can withhold it.
            let value = quote(&e.instance().to_string(), 60);
            let message = e.masked_with(value).to_string();
            let path = e.instance_path().to_string();
            if path.is_empty() {
                message
            } else {
                format!("{path}: {message}")
            }
        })
        .collect())
}

/// Quotes (at most `max` characters of) answer or request text inside `⟦…⟧`, so that
/// `--no-content` can find and remove every quoted excerpt ([`scrub_quotes`]).
pub fn quote(text: &str, max: usize) -> String {
    let mut cut: String = text
        .chars()
        .take(max)
        .map(|c| if c == '⟧' { ']' } else { c })
        .collect();
    if text.chars().count() > max {
        cut.push('…');
    }
    format!("⟦{cut}⟧")
}

/// Replaces every [`quote`]d excerpt with its length only.
pub fn scrub_quotes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('⟦') {
        out.push_str(&rest[..start]);
        let after = &rest[start + '⟦'.len_utf8()..];
        match after.find('⟧') {
            Some(end) => {
                out.push_str(&format!(
                    "⟦{} chars withheld⟧",
                    after[..end].chars().count()
                ));
                rest = &after[end + '⟧'.len_utf8()..];
            }
            None => {
                out.push_str("⟦withheld⟧");
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}
