//! `golive completions SHELL`: the completion script, generated from the clap definitions.

#[derive(Debug, Clone, clap::Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

pub fn run(args: CompletionsArgs) -> anyhow::Result<u8> {
    let mut script = Vec::new();
    clap_complete::generate(
        args.shell,
        &mut crate::cli::command(),
        "golive",
        &mut script,
    );
    crate::out::text(&String::from_utf8_lossy(&script))?;
    Ok(crate::exit::OK)
}
