//! Comparing two greedy answers: the first diverging token and character, both
//! continuations, and whether the divergence was a near tie (float noise) or a real one.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A divergence counts as a near tie when, on one of the two paths, the other path's
/// token was within this many nats of the chosen one. Cached and uncached kernels (and
/// replicas with other batch shapes) differ in float rounding, which moves logprobs by
/// far less (measured on llama.cpp, README); a corrupted path changes tokens that had a
/// clear lead.
pub const TIE_MARGIN: f64 = 0.1;

/// Same tokens whose logprobs differ by more than this (nats) are a warning: the text
/// agrees but the distribution behind it does not.
pub const LOGPROB_TOLERANCE: f64 = 0.5;

/// One generated token with its logprob and the runner-ups the engine returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Token {
    /// The token's text.
    pub token: String,
    /// Its log probability (nats); `None` when the engine did not return it.
    pub logprob: Option<f64>,
    /// The runner-ups the engine listed: (token, logprob).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top: Vec<(String, f64)>,
}

/// One greedy answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    /// The answer's text (`choices[0].text`).
    pub text: String,
    /// Present when the engine returned logprobs.
    pub tokens: Option<Vec<Token>>,
    /// Prompt tokens as `usage` counts them; `None` when not returned.
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens served from the cache, where the engine says (llama.cpp
    /// `timings.cache_n`, vLLM `usage.prompt_tokens_details.cached_tokens`).
    pub cached_tokens: Option<u64>,
}

/// Reads a `/v1/completions` answer: llama.cpp's `logprobs.content` list or the OpenAI
/// legacy `logprobs.tokens` / `token_logprobs` / `top_logprobs` (vLLM).
pub fn parse_completion(body: &Value) -> anyhow::Result<Generation> {
    let choice = body
        .pointer("/choices/0")
        .ok_or_else(|| anyhow::anyhow!("no choices in the answer"))?;
    let text = choice
        .get("text")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow::anyhow!("choices[0].text is missing"))?
        .to_string();
    let lp = choice.get("logprobs").filter(|v| !v.is_null());
    let tokens = lp.and_then(|lp| {
        if let Some(content) = lp.get("content").and_then(Value::as_array) {
            return Some(
                content
                    .iter()
                    .map(|t| Token {
                        token: t["token"].as_str().unwrap_or("").to_string(),
                        logprob: t["logprob"].as_f64(),
                        top: t["top_logprobs"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|x| {
                                Some((x["token"].as_str()?.to_string(), x["logprob"].as_f64()?))
                            })
                            .collect(),
                    })
                    .collect(),
            );
        }
        let toks = lp.get("tokens")?.as_array()?;
        let lps = lp.get("token_logprobs").and_then(Value::as_array);
        let tops = lp.get("top_logprobs").and_then(Value::as_array);
        Some(
            toks.iter()
                .enumerate()
                .map(|(i, t)| Token {
                    token: t.as_str().unwrap_or("").to_string(),
                    logprob: lps.and_then(|l| l.get(i)).and_then(Value::as_f64),
                    top: tops
                        .and_then(|l| l.get(i))
                        .and_then(Value::as_object)
                        .map(|m| {
                            m.iter()
                                .filter_map(|(k, v)| Some((k.clone(), v.as_f64()?)))
                                .collect()
                        })
                        .unwrap_or_default(),
                })
                .collect(),
        )
    });
    Ok(Generation {
        text,
        tokens,
        prompt_tokens: body.pointer("/usage/prompt_tokens").and_then(Value::as_u64),
        cached_tokens: body
            .pointer("/timings/cache_n")
            .or_else(|| body.pointer("/usage/prompt_tokens_details/cached_tokens"))
            .and_then(Value::as_u64),
    })
}

/// Where two answers first differ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    /// Index of the first differing generated token (when both returned tokens).
    pub token_index: Option<usize>,
    /// Index of the first differing character of the text.
    pub char_index: usize,
    /// The first answer's continuation from that point (at most 40 characters).
    pub a: String,
    /// The second answer's continuation from that point (at most 40 characters).
    pub b: String,
    /// At the first differing token: how far (nats) the other path's token was behind
    /// the chosen one, the smaller of the two paths' views; `None` when neither path
    /// listed the other's token among its runner-ups.
    pub margin: Option<f64>,
    /// `margin` is below [`TIE_MARGIN`]: float noise between kernels, a warning, not a failure.
    pub near_tie: bool,
}

/// How two answers compare.
#[derive(Debug, Clone, PartialEq)]
pub enum Comparison {
    /// Same tokens (or text); the largest logprob difference over them, where returned.
    Same {
        /// Largest logprob difference (nats) over the tokens; `None` when logprobs were missing.
        max_logprob_diff: Option<f64>,
    },
    /// The answers differ: where, and by how much.
    Differs(Divergence),
}

fn chars_from(s: &str, at: usize) -> String {
    s.chars().skip(at).take(40).collect()
}

/// Compares two greedy answers token by token (text when tokens are missing).
pub fn compare(a: &Generation, b: &Generation) -> Comparison {
    let char_index = a
        .text
        .chars()
        .zip(b.text.chars())
        .take_while(|(x, y)| x == y)
        .count();
    let (Some(ta), Some(tb)) = (&a.tokens, &b.tokens) else {
        if a.text == b.text {
            return Comparison::Same {
                max_logprob_diff: None,
            };
        }
        return Comparison::Differs(Divergence {
            token_index: None,
            char_index,
            a: chars_from(&a.text, char_index),
            b: chars_from(&b.text, char_index),
            margin: None,
            near_tie: false,
        });
    };
    let first = ta.iter().zip(tb).position(|(x, y)| x.token != y.token);
    let first = first.or_else(|| (ta.len() != tb.len()).then(|| ta.len().min(tb.len())));
    let Some(k) = first else {
        let max = ta
            .iter()
            .zip(tb)
            .filter_map(|(x, y)| Some((x.logprob? - y.logprob?).abs()))
            .reduce(f64::max);
        return Comparison::Same {
            max_logprob_diff: max,
        };
    };
    // How far behind its own choice each path ranked the other path's token.
    let behind = |own: &Token, other: &str| -> Option<f64> {
        let chosen = own.logprob?;
        own.top
            .iter()
            .find(|(t, _)| t == other)
            .map(|(_, lp)| chosen - lp)
    };
    let margin = match (ta.get(k), tb.get(k)) {
        (Some(x), Some(y)) => match (behind(x, &y.token), behind(y, &x.token)) {
            (Some(p), Some(q)) => Some(p.min(q)),
            (p, q) => p.or(q),
        },
        _ => None,
    };
    Comparison::Differs(Divergence {
        token_index: Some(k),
        char_index,
        a: chars_from(&a.text, char_index),
        b: chars_from(&b.text, char_index),
        margin,
        near_tie: margin.is_some_and(|m| m.abs() < TIE_MARGIN),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A token, its logprob and its runner-ups.
    type Tok<'a> = (&'a str, f64, &'a [(&'a str, f64)]);

    fn generation(tokens: &[Tok]) -> Generation {
        Generation {
            text: tokens.iter().map(|t| t.0).collect(),
            tokens: Some(
                tokens
                    .iter()
                    .map(|(t, lp, top)| Token {
                        token: t.to_string(),
                        logprob: Some(*lp),
                        top: top.iter().map(|(a, b)| (a.to_string(), *b)).collect(),
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn the_first_diverging_token_and_its_margin_are_found() {
        let a = generation(&[
            (" QX", -0.1, &[]),
            ("-77", -0.2, &[("-77", -0.2), ("-71", -2.5)]),
            ("31", -0.1, &[]),
        ]);
        let b = generation(&[
            (" QX", -0.1, &[]),
            ("-71", -0.3, &[("-71", -0.3), ("-77", -0.35)]),
            ("13", -0.1, &[]),
        ]);
        let Comparison::Differs(d) = compare(&a, &b) else {
            panic!("must differ")
        };
        assert_eq!(d.token_index, Some(1));
        assert_eq!(d.char_index, 5);
        assert_eq!((d.a.as_str(), d.b.as_str()), ("731", "113"));
        // b nearly chose a's token (0.05 nats), so this is a near tie.
        assert!((d.margin.unwrap() - 0.05).abs() < 1e-9 && d.near_tie);
        let c = generation(&[
            (" QX", -0.1, &[]),
            ("-71", -0.3, &[("-71", -0.3), ("-77", -3.0)]),
            ("13", -0.1, &[]),
        ]);
        let Comparison::Differs(d) = compare(&a, &c) else {
            panic!("must differ")
        };
        assert!(!d.near_tie, "{d:?}");
        assert_eq!(
            compare(&a, &a),
            Comparison::Same {
                max_logprob_diff: Some(0.0)
            }
        );
    }

    #[test]
    fn both_logprob_layouts_are_read() {
        let llama = json!({"choices":[{"text":" 5","logprobs":{"content":[{"token":" 5","logprob":-0.01,"top_logprobs":[{"token":" 5","logprob":-0.01},{"token":" 6","logprob":-5.0}]}]}}],
            "usage":{"prompt_tokens":12},"timings":{"cache_n":11}});
        let g = parse_completion(&llama).unwrap();
        assert_eq!(g.tokens.as_ref().unwrap()[0].top.len(), 2);
        assert_eq!((g.prompt_tokens, g.cached_tokens), (Some(12), Some(11)));
        let legacy = json!({"choices":[{"text":" 5","logprobs":{"tokens":[" 5"],"token_logprobs":[-0.01],"top_logprobs":[{" 5":-0.01," 6":-5.0}]}}]});
        let g = parse_completion(&legacy).unwrap();
        assert_eq!(g.tokens.unwrap()[0].top.len(), 2);
        assert!(parse_completion(&json!({"choices": []})).is_err());
    }
}
