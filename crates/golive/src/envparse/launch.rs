//! The vLLM launch command, read from what people actually save: a one-line
//! process command line, a shell script with `\` continuations and `export`s,
//! a `docker run`, a compose file's entrypoint, a `docker inspect` Path+Args.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::normalize;

/// One argument of the launch command, flag names normalised to `--long-form`
/// with dashes (`--max_num_seqs` → `--max-num-seqs`, `-tp4` → `--tensor-parallel-size 4`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchArg {
    /// The flag, e.g. `--tensor-parallel-size`.
    pub flag: String,
    /// Its value (secrets redacted); `None`: a switch without one.
    pub value: Option<String>,
}

/// The vLLM server invocation found in a file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    /// How vLLM is started: `vllm serve`, `python -m vllm.entrypoints.openai.api_server`,
    /// or `docker run IMAGE` when only the container's arguments are given.
    pub program: String,
    /// The model served: the first positional word, else `--model`.
    pub model: Option<String>,
    /// Every flag in the order given, the `--config` file's first (so the command line wins).
    pub args: Vec<LaunchArg>,
    /// Environment set on the command, by `export`, `-e` or a compose `environment:` list.
    pub env: BTreeMap<String, String>,
    /// The image of a `docker run` or compose service.
    pub image: Option<String>,
}

const FLAG_ALIASES: &[(&str, &str)] = &[
    ("-tp", "--tensor-parallel-size"),
    ("-pp", "--pipeline-parallel-size"),
    ("-dp", "--data-parallel-size"),
    ("-dpl", "--data-parallel-size-local"),
    ("-dpr", "--data-parallel-rank"),
    ("-dpa", "--data-parallel-address"),
    ("-dpp", "--data-parallel-rpc-port"),
    ("-ep", "--enable-expert-parallel"),
    ("-q", "--quantization"),
];

/// Flags that never take a value (the rest take one unless followed by another flag).
fn is_boolean_flag(flag: &str) -> bool {
    flag.starts_with("--enable-")
        || flag.starts_with("--no-")
        || flag.starts_with("--disable-")
        || matches!(
            flag,
            "--trust-remote-code"
                | "--enforce-eager"
                | "--headless"
                | "--language-model-only"
                | "--data-parallel-hybrid-lb"
                | "--data-parallel-external-lb"
                | "--skip-tokenizer-init"
                | "--async-scheduling"
                | "--disable-log-requests"
                | "--disable-log-stats"
        )
}

impl Launch {
    /// The last occurrence of a flag (argparse semantics: the last one wins).
    pub fn get(&self, flag: &str) -> Option<&LaunchArg> {
        self.args.iter().rev().find(|a| a.flag == flag)
    }
    /// The flag is given.
    pub fn has(&self, flag: &str) -> bool {
        self.get(flag).is_some()
    }
    /// The flag's value (the last occurrence); `None`: absent or given without one.
    pub fn value(&self, flag: &str) -> Option<&str> {
        self.get(flag).and_then(|a| a.value.as_deref())
    }
    fn size(&self, flag: &str) -> Option<u64> {
        self.value(flag).and_then(|v| v.trim().parse().ok())
    }
    /// `--tensor-parallel-size`; 1 when absent.
    pub fn tensor_parallel(&self) -> u64 {
        self.size("--tensor-parallel-size").unwrap_or(1)
    }
    /// `--pipeline-parallel-size`; 1 when absent.
    pub fn pipeline_parallel(&self) -> u64 {
        self.size("--pipeline-parallel-size").unwrap_or(1)
    }
    /// `--data-parallel-size`; 1 when absent.
    pub fn data_parallel(&self) -> u64 {
        self.size("--data-parallel-size").unwrap_or(1)
    }
    /// Data-parallel ranks on this node (defaults to all of them).
    pub fn data_parallel_local(&self) -> u64 {
        self.size("--data-parallel-size-local")
            .unwrap_or_else(|| self.data_parallel())
    }
    /// Whether prefix caching is switched on (`Some(true)`), off (`Some(false)`), or left
    /// to the default (`None`), by the last flag that mentions it.
    pub fn prefix_caching(&self) -> Option<bool> {
        self.args.iter().rev().find_map(|a| match a.flag.as_str() {
            "--enable-prefix-caching" => Some(!matches!(
                a.value.as_deref().map(str::to_ascii_lowercase).as_deref(),
                Some("false") | Some("0")
            )),
            "--no-enable-prefix-caching" => Some(false),
            _ => None,
        })
    }
    /// The all-to-all backend: `--all2all-backend`, else `VLLM_ALL2ALL_BACKEND`.
    pub fn all2all_backend(&self) -> Option<String> {
        self.value("--all2all-backend")
            .map(String::from)
            .or_else(|| self.env.get("VLLM_ALL2ALL_BACKEND").cloned())
    }
    /// Signs that this command is one node of a multi-node deployment.
    pub fn multi_node_hint(&self) -> Option<String> {
        if self.has("--headless") {
            return Some("--headless".into());
        }
        if self.data_parallel_local() < self.data_parallel() {
            return Some(format!(
                "--data-parallel-size {} > --data-parallel-size-local {}",
                self.data_parallel(),
                self.data_parallel_local()
            ));
        }
        if self.value("--distributed-executor-backend") == Some("ray") {
            return Some("--distributed-executor-backend ray".into());
        }
        if let Some(n) = self.size("--nnodes").filter(|n| *n > 1) {
            return Some(format!("--nnodes {n}"));
        }
        None
    }
    /// The command as one shell line (arguments only, without env).
    pub fn command_line(&self) -> String {
        let mut parts: Vec<String> = self.program.split_whitespace().map(String::from).collect();
        if let Some(m) = &self.model {
            if self.program.ends_with("serve") {
                parts.push(m.clone());
            }
        }
        for a in &self.args {
            parts.push(a.flag.clone());
            if let Some(v) = &a.value {
                parts.push(v.clone());
            }
        }
        shlex::try_join(parts.iter().map(String::as_str)).unwrap_or_else(|_| parts.join(" "))
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    /// `&&`, `||`, `;`, `|`, `&`: ends a command.
    Sep,
    /// `>`, `>>`, `&>>`, `2>&1`...: the next word is a redirect target.
    Redirect,
}

/// A tolerant shell tokenizer: quotes, backslashes, operators; never fails
/// (an unbalanced quote runs to the end).
fn tokenize(line: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    let flush = |cur: &mut String, in_word: &mut bool, out: &mut Vec<Tok>| {
        if *in_word {
            out.push(Tok::Word(std::mem::take(cur)));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for d in chars.by_ref() {
                    if d == '\'' {
                        break;
                    }
                    cur.push(d);
                }
            }
            '"' => {
                in_word = true;
                while let Some(d) = chars.next() {
                    match d {
                        '"' => break,
                        '\\' => {
                            if let Some(e) = chars.next() {
                                if !matches!(e, '"' | '\\' | '$' | '`') {
                                    cur.push('\\');
                                }
                                cur.push(e);
                            }
                        }
                        _ => cur.push(d),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(e) = chars.next() {
                    cur.push(e);
                }
            }
            c if c.is_whitespace() => flush(&mut cur, &mut in_word, &mut out),
            // "<placeholder>" in documented commands is a word, not a redirect.
            '<' if chars.peek().is_some_and(|d| d.is_ascii_alphanumeric())
                && chars
                    .clone()
                    .take_while(|d| !d.is_whitespace())
                    .any(|d| d == '>') =>
            {
                in_word = true;
                cur.push(c);
                for d in chars.by_ref() {
                    cur.push(d);
                    if d == '>' {
                        break;
                    }
                }
            }
            ';' | '|' | '&' | '<' | '>' => {
                // A bare fd number before a redirect ("2>&1") belongs to the redirect.
                let fd_prefix = in_word && cur.chars().all(|d| d.is_ascii_digit());
                if fd_prefix && (c == '>' || c == '<') {
                    cur.clear();
                    in_word = false;
                } else {
                    flush(&mut cur, &mut in_word, &mut out);
                }
                let mut op = String::from(c);
                while let Some(&d) = chars.peek() {
                    if matches!(d, ';' | '|' | '&' | '<' | '>') {
                        op.push(d);
                        chars.next();
                    } else {
                        break;
                    }
                }
                if op.contains('>') || op.contains('<') {
                    out.push(Tok::Redirect);
                    // "2>&1": the target is "&1" glued to the operator or a digit after it.
                    if op.ends_with('&') {
                        while chars.peek().is_some_and(|d| d.is_ascii_digit()) {
                            chars.next();
                        }
                        out.push(Tok::Word(String::new()));
                    }
                } else {
                    out.push(Tok::Sep);
                }
            }
            _ => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    flush(&mut cur, &mut in_word, &mut out);
    out
}

fn is_assignment(word: &str) -> Option<(&str, &str)> {
    let (name, value) = word.split_once('=')?;
    let ok = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    ok.then_some((name, value))
}

fn is_env_name(name: &str) -> bool {
    name.chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && name.chars().any(|c| c.is_ascii_uppercase())
}

/// Expands `$name` / `${name}` from assignments seen earlier in the file; unknown
/// names stay as written.
fn expand(word: &str, vars: &BTreeMap<String, String>) -> String {
    if !word.contains('$') {
        return word.to_string();
    }
    let mut out = String::new();
    let mut rest = word;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        let (name, consumed) = if let Some(inner) = after.strip_prefix('{') {
            match inner.find('}') {
                Some(end) => (&inner[..end], end + 2),
                None => ("", 0),
            }
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        match vars.get(name) {
            Some(v) if !name.is_empty() => out.push_str(v),
            _ => out.push_str(&rest[pos..pos + 1 + consumed]),
        }
        rest = &rest[pos + 1 + consumed..];
    }
    out.push_str(rest);
    out
}

/// Joins `\`-continued lines (a trailing backslash, with or without trailing blanks).
fn logical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        let trimmed = line.trim_end();
        if let Some(stripped) = trimmed.strip_suffix('\\') {
            cur.push_str(stripped);
            cur.push(' ');
        } else {
            cur.push_str(line);
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}

/// Where the vLLM program starts in a command's words, and its display name.
fn find_program(words: &[String]) -> Option<(usize, usize, String)> {
    for (i, w) in words.iter().enumerate() {
        let base = w.rsplit('/').next().unwrap_or(w);
        if base == "vllm" && words.get(i + 1).is_some_and(|n| n == "serve") {
            return Some((i, i + 2, "vllm serve".into()));
        }
        if w == "-m" {
            if let Some(module) = words.get(i + 1).filter(|m| m.starts_with("vllm.")) {
                let start = i.saturating_sub(1);
                let python = words
                    .get(start)
                    .map(|p| p.rsplit('/').next().unwrap_or(p).to_string());
                let mut end = i + 2;
                let mut name = format!("{} -m {module}", python.unwrap_or_else(|| "python".into()));
                if words.get(end).is_some_and(|n| n == "serve") {
                    end += 1;
                    name.push_str(" serve");
                }
                return Some((start, end, name));
            }
        }
    }
    None
}

/// Docker flags that take a value (the rest of `docker run`'s flags are booleans).
fn docker_flag_takes_value(flag: &str) -> bool {
    if flag.contains('=') {
        return false;
    }
    matches!(
        flag,
        "--restart"
            | "--runtime"
            | "--gpus"
            | "--name"
            | "-v"
            | "--volume"
            | "-p"
            | "--publish"
            | "--shm-size"
            | "--ipc"
            | "-e"
            | "--env"
            | "--env-file"
            | "-u"
            | "--user"
            | "--network"
            | "--net"
            | "--entrypoint"
            | "-w"
            | "--workdir"
            | "--device"
            | "--ulimit"
            | "--cap-add"
            | "--security-opt"
            | "--mount"
            | "--label"
            | "-l"
            | "--memory"
            | "-m"
            | "--cpus"
            | "--hostname"
            | "-h"
            | "--add-host"
            | "--platform"
            | "--pid"
            | "--log-driver"
            | "--log-opt"
            | "--cpuset-cpus"
            | "--group-add"
    )
}

fn parse_args(words: &[String]) -> (Option<String>, Vec<LaunchArg>) {
    // Secrets never leave the parser: list values too (`--api-key K1 K2`).
    let words = &crate::redact::redact_args(words);
    let mut model = None;
    let mut args = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        i += 1;
        // Empty, or the second value of a secret list flag.
        if w.is_empty() || w == crate::redact::REDACTED {
            continue;
        }
        if !w.starts_with('-') || w == "-" {
            if model.is_none() {
                model = Some(w.clone());
            }
            continue;
        }
        let (mut flag, mut value) = match w.split_once('=') {
            Some((f, v)) => (f.to_string(), Some(v.to_string())),
            None => (w.clone(), None),
        };
        if !flag.starts_with("--") {
            // Short forms: "-tp4" / "-tp 4".
            let letters: String = flag
                .chars()
                .take_while(|c| *c == '-' || c.is_ascii_alphabetic())
                .collect();
            let digits = &flag[letters.len()..];
            if !digits.is_empty() && value.is_none() {
                value = Some(digits.to_string());
                flag = letters;
            }
            if let Some((_, long)) = FLAG_ALIASES.iter().find(|(s, _)| *s == flag) {
                flag = long.to_string();
            }
        }
        // `--max_num_seqs` == `--max-num-seqs`; dotted config keys keep their underscores.
        let flag = if let Some(long) = flag.strip_prefix("--") {
            match long.split_once('.') {
                Some((head, rest)) => format!("--{}.{rest}", head.replace('_', "-")),
                None => format!("--{}", long.replace('_', "-")),
            }
        } else {
            flag
        };
        if value.is_none() && !is_boolean_flag(&flag) {
            if let Some(next) = words.get(i) {
                let looks_negative_number =
                    next.starts_with('-') && next[1..].parse::<f64>().is_ok();
                if !next.starts_with('-') || looks_negative_number {
                    value = Some(next.clone());
                    i += 1;
                }
            }
        }
        if flag == "--model" && model.is_none() {
            model = value.clone();
        }
        args.push(LaunchArg { flag, value });
    }
    (model, args)
}

/// Finds the vLLM launch in a file (script, one-liner, compose file). `None` when
/// there is no recognisable vLLM invocation.
pub fn parse_launch(text: &str) -> Option<Launch> {
    let text = normalize(text);
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    let mut file_env: BTreeMap<String, String> = BTreeMap::new();
    let mut compose_image = None;
    let mut best: Option<Launch> = None;
    let mut docker_fallback: Option<Launch> = None;
    for line in logical_lines(&text) {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || trimmed.is_empty() {
            continue;
        }
        // Compose: "image: x" and "- NAME=value" list items.
        if let Some(img) = trimmed.strip_prefix("image:") {
            compose_image = Some(img.trim().trim_matches('"').to_string());
            continue;
        }
        if let Some(item) = trimmed.strip_prefix("- ") {
            if let Some((n, v)) = is_assignment(item.trim()) {
                if is_env_name(n) {
                    file_env.insert(n.into(), v.trim_matches('"').into());
                }
                continue;
            }
        }
        let toks = tokenize(trimmed);
        let mut segments: Vec<Vec<String>> = vec![Vec::new()];
        let mut skip_next = false;
        for t in toks {
            match t {
                Tok::Sep => segments.push(Vec::new()),
                Tok::Redirect => skip_next = true,
                Tok::Word(w) => {
                    if skip_next {
                        skip_next = false;
                    } else if let Some(seg) = segments.last_mut() {
                        seg.push(expand(&w, &vars));
                    }
                }
            }
        }
        for seg in segments.into_iter().filter(|s| !s.is_empty()) {
            let mut words: &[String] = &seg;
            if words.first().is_some_and(|w| w == "export") {
                words = &words[1..];
            }
            // A line of assignments only: shell variables (and env when upper-case).
            if words.iter().all(|w| is_assignment(w).is_some()) {
                for w in words {
                    if let Some((n, v)) = is_assignment(w) {
                        vars.insert(n.to_string(), v.to_string());
                        if is_env_name(n) {
                            file_env.insert(n.to_string(), v.to_string());
                        }
                    }
                }
                continue;
            }
            if let Some((start, end, program)) = find_program(words) {
                let mut env = BTreeMap::new();
                let mut j = 0;
                while j < start {
                    let w = &words[j];
                    if w == "env" {
                        j += 1;
                        continue;
                    }
                    if w == "-u" {
                        j += 2;
                        continue;
                    }
                    if let Some((n, v)) = is_assignment(w) {
                        env.insert(n.to_string(), v.to_string());
                    }
                    j += 1;
                }
                let (model, args) = parse_args(&words[end..]);
                best = Some(Launch {
                    program,
                    model,
                    args,
                    env,
                    image: compose_image.clone(),
                });
                continue;
            }
            if let Some(run) = words.iter().position(|w| w == "run") {
                if words[..run]
                    .iter()
                    .any(|w| w.ends_with("docker") || w.ends_with("podman"))
                {
                    let mut env = BTreeMap::new();
                    let mut j = run + 1;
                    let mut image = None;
                    while j < words.len() {
                        let w = &words[j];
                        if w == "-e" || w == "--env" {
                            if let Some((n, v)) = words.get(j + 1).and_then(|x| is_assignment(x)) {
                                env.insert(n.to_string(), v.to_string());
                            }
                        } else if let Some(rest) =
                            w.strip_prefix("--env=").or_else(|| w.strip_prefix("-e="))
                        {
                            if let Some((n, v)) = is_assignment(rest) {
                                env.insert(n.to_string(), v.to_string());
                            }
                        }
                        if w.starts_with('-') {
                            j += if docker_flag_takes_value(w) { 2 } else { 1 };
                            continue;
                        }
                        image = Some(w.clone());
                        j += 1;
                        break;
                    }
                    let rest = &words[j.min(words.len())..];
                    let launch = if let Some((_, end, program)) = find_program(rest) {
                        let (model, args) = parse_args(&rest[end..]);
                        Launch {
                            program,
                            model,
                            args,
                            env,
                            image,
                        }
                    } else {
                        let (model, args) = parse_args(rest);
                        let program = format!("docker run {}", image.clone().unwrap_or_default());
                        Launch {
                            program,
                            model,
                            args,
                            env,
                            image,
                        }
                    };
                    docker_fallback = Some(launch);
                }
            }
        }
    }
    let mut launch = best.or(docker_fallback)?;
    for (k, v) in file_env {
        launch.env.entry(k).or_insert(v);
    }
    for (k, v) in launch.env.iter_mut() {
        *v = crate::redact::redact_pair(k, v);
    }
    if launch.image.is_none() {
        launch.image = compose_image;
    }
    Some(launch)
}

/// A launch from a container's `Path` and `Args` (docker inspect).
pub fn launch_from_argv(argv: &[String]) -> Option<Launch> {
    let words: Vec<String> = argv.to_vec();
    let (end, program) = match find_program(&words) {
        Some((_, end, program)) => (end, program),
        // vllm-openai images: the entrypoint is `vllm serve`, Args are its arguments.
        None if words.first().is_some_and(|w| w.starts_with('-')) => (0, "vllm serve".to_string()),
        None => return None,
    };
    let (model, args) = parse_args(&words[end..]);
    Some(Launch {
        program,
        model,
        args,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_serve() {
        let l = parse_launch(
            "vllm serve m --tensor-parallel-size 8 --enable-prefix-caching --max_num_seqs=16 -tp4",
        )
        .unwrap();
        assert_eq!(l.model.as_deref(), Some("m"));
        assert_eq!(l.tensor_parallel(), 4);
        assert_eq!(l.value("--max-num-seqs"), Some("16"));
        assert_eq!(l.prefix_caching(), Some(true));
        assert_eq!(
            l.command_line(),
            "vllm serve m --tensor-parallel-size 8 --enable-prefix-caching --max-num-seqs 16 --tensor-parallel-size 4"
        );
    }

    #[test]
    fn secrets_never_leave_the_parser() {
        let l = parse_launch("HF_TOKEN=hf_x vllm serve m --api-key sk-1 --hf-token=hf_2").unwrap();
        let all = format!("{l:?}");
        assert!(
            !all.contains("sk-1") && !all.contains("hf_2") && !all.contains("hf_x"),
            "{all}"
        );
        assert_eq!(l.value("--api-key"), Some("<redacted>"));
    }

    #[test]
    fn variables_and_redirects() {
        let l = parse_launch(
            "tp=2\nNCCL_DEBUG=INFO vllm serve m --tensor-parallel-size ${tp} >> log.txt 2>&1 &\n",
        )
        .unwrap();
        assert_eq!(l.tensor_parallel(), 2);
        assert_eq!(l.env["NCCL_DEBUG"], "INFO");
        assert_eq!(l.args.len(), 1);
    }

    #[test]
    fn docker_run_image_args() {
        let l = parse_launch("docker run --gpus all -e NCCL_P2P_DISABLE=1 --name x vllm/vllm-openai:latest --model m --tensor-parallel-size 2").unwrap();
        assert_eq!(l.image.as_deref(), Some("vllm/vllm-openai:latest"));
        assert_eq!(l.env["NCCL_P2P_DISABLE"], "1");
        assert_eq!(l.model.as_deref(), Some("m"));
        assert_eq!(l.tensor_parallel(), 2);
    }
}
