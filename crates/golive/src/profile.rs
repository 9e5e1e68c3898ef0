//! Profiles: what a deployment requires (image, driver, GPUs, flags), as data.
