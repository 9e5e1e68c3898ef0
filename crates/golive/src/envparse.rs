//! Parsers for the raw files of a bundle (nvidia-smi, topology, docker inspect,
//! launch command, env, lsmod, ibv_devinfo).
