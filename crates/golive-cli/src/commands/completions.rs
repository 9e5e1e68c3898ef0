//! `golive completions SHELL`: the completion script, generated from the clap definitions.

#[derive(Debug, Clone, clap::Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

/// Prints the script for `command` (the whole golive command line).
pub fn run(args: CompletionsArgs, mut command: clap::Command) -> anyhow::Result<u8> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "golive", &mut script);
    crate::out::text(&String::from_utf8_lossy(&script))?;
    Ok(crate::exit::OK)
}
