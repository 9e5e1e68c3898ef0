//! The binary's one async runtime. The library's network entry points are `async` and build
//! no runtime of their own, so they can be called from async code; the binary owns this one.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::Runtime;

/// The process's runtime, built on first use. It lives until the process exits, so a command
/// that returns while a task still runs (`golive watch | head`) is never held by its shutdown.
pub fn get() -> anyhow::Result<&'static Runtime> {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?;
    Ok(RUNTIME.get_or_init(|| rt))
}

/// Runs `fut` to its end on the process's runtime.
pub fn block_on<F: Future>(fut: F) -> anyhow::Result<F::Output> {
    Ok(get()?.block_on(fut))
}
