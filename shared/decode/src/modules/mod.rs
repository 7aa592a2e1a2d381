//! Vendor modules and their registry: a module is chosen by the raw event's
//! `source`, compared as an exact, case-sensitive string, with the default module as fallback.
//! A lowercase source therefore falls to the default module, as in model-garage; dq keeps that
//! parity instead of normalising case.

pub mod default;
pub mod ruptela;
pub mod tesla;
pub mod v2;

use crate::model::{Decoded, Event, Signal};
use dq_cloudevent::RawEvent;

/// Connection (oracle) addresses, exactly as din writes them (EIP-55).
pub mod sources {
    /// AutoPi.
    pub const AUTOPI: &str = "0x5e31bBc786D7bEd95216383787deA1ab0f1c1897";
    /// Ruptela.
    pub const RUPTELA: &str = "0xF26421509Efe92861a587482100c6d728aBf1CD0";
    /// Kaufmann: the Ruptela protocol for synthetic devices.
    pub const KAUFMANN: &str = "0x8D8cDB2B26423c8fDbb27321aF20b4659Ce919fD";
    /// HashDog / Macaron (LoRaWAN).
    pub const HASHDOG: &str = "0x4c674ddE8189aEF6e3b58F5a36d7438b2b1f6Bc2";
    /// Tesla.
    pub const TESLA: &str = "0xc4035Fecb1cc906130423EF05f9C20977F643722";
}

/// The module that turns a `dimo.status` row into signals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalModule {
    /// Any source without a vendor module.
    Default,
    /// AutoPi V2.
    AutoPi,
    /// HashDog / Macaron V2.
    HashDog,
    /// Ruptela and Kaufmann.
    Ruptela,
    /// Tesla Fleet API and Fleet Telemetry.
    Tesla,
}

impl SignalModule {
    /// Registry lookup by exact source string.
    pub fn for_source(source: &str) -> Self {
        match source {
            sources::AUTOPI => SignalModule::AutoPi,
            sources::HASHDOG => SignalModule::HashDog,
            sources::RUPTELA | sources::KAUFMANN => SignalModule::Ruptela,
            sources::TESLA => SignalModule::Tesla,
            _ => SignalModule::Default,
        }
    }

    /// Module name for logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            SignalModule::Default => "default",
            SignalModule::AutoPi => "autopi",
            SignalModule::HashDog => "hashdog",
            SignalModule::Ruptela => "ruptela",
            SignalModule::Tesla => "tesla",
        }
    }

    /// Runs the module.
    pub fn convert(self, event: &RawEvent) -> Decoded<Signal> {
        match self {
            SignalModule::Default => default::convert_signals(event),
            SignalModule::AutoPi => v2::convert_signals(event, v2::Flavour::AutoPi),
            SignalModule::HashDog => v2::convert_signals(event, v2::Flavour::HashDog),
            SignalModule::Ruptela => ruptela::convert_signals(event),
            SignalModule::Tesla => tesla::convert_signals(event),
        }
    }
}

/// The module that turns a `dimo.events` row into events. Only Ruptela/Kaufmann have their
/// own; every other source (AutoPi, HashDog, Tesla included) uses the default module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventModule {
    /// The default events payload.
    Default,
    /// Ruptela behaviour and engine-block events.
    Ruptela,
}

impl EventModule {
    /// Registry lookup by exact source string.
    pub fn for_source(source: &str) -> Self {
        match source {
            sources::RUPTELA | sources::KAUFMANN => EventModule::Ruptela,
            _ => EventModule::Default,
        }
    }

    /// Module name for logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            EventModule::Default => "default",
            EventModule::Ruptela => "ruptela",
        }
    }

    /// Runs the module.
    pub fn convert(self, event: &RawEvent) -> Decoded<Event> {
        match self {
            EventModule::Default => default::convert_events(event),
            EventModule::Ruptela => ruptela::convert_events(event),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_exact_and_falls_back_to_default() {
        assert_eq!(
            SignalModule::for_source(sources::KAUFMANN),
            SignalModule::Ruptela
        );
        assert_eq!(
            SignalModule::for_source(sources::TESLA),
            SignalModule::Tesla
        );
        assert_eq!(
            SignalModule::for_source(&sources::AUTOPI.to_lowercase()),
            SignalModule::Default
        );
        assert_eq!(
            SignalModule::for_source("0x55BF1c27d468314Ea119CF74979E2b59F962295c"),
            SignalModule::Default
        );
        assert_eq!(
            EventModule::for_source(sources::AUTOPI),
            EventModule::Default
        );
        assert_eq!(EventModule::for_source(sources::RUPTELA).name(), "ruptela");
        assert_eq!(SignalModule::for_source(sources::HASHDOG).name(), "hashdog");
    }
}
