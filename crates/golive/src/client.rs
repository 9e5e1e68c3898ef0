//! OpenAI-compatible client with per-request timing (scheduled start, start, first
//! byte, first token, every token, end).
