//! The subset of Tesla Fleet Telemetry's `vehicle_data.proto` (fleet-telemetry v0.8.0) that
//! dq decodes, written by hand so no `protoc` is needed. Field numbers match the upstream
//! schema; enum-typed fields are read as `int32`, which is wire-compatible.

/// `google.protobuf.Timestamp`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// One telemetry message.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Payload {
    #[prost(message, repeated, tag = "1")]
    pub data: Vec<Datum>,
    #[prost(message, optional, tag = "2")]
    pub created_at: Option<Timestamp>,
    #[prost(string, tag = "3")]
    pub vin: String,
    #[prost(bool, tag = "4")]
    pub is_resend: bool,
}

/// One field reading.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Datum {
    /// A `Field` enum number.
    #[prost(int32, tag = "1")]
    pub key: i32,
    #[prost(message, optional, tag = "2")]
    pub value: Option<Value>,
}

/// `Value`: only the oneof cases dq maps; any other case decodes as `None`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Value {
    #[prost(oneof = "value::Kind", tags = "1, 2, 5, 7, 10, 21, 24, 32")]
    pub kind: Option<value::Kind>,
}

pub(crate) mod value {
    /// The `Value.value` oneof.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum Kind {
        #[prost(string, tag = "1")]
        StringValue(String),
        #[prost(int32, tag = "2")]
        IntValue(i32),
        #[prost(double, tag = "5")]
        DoubleValue(f64),
        #[prost(message, tag = "7")]
        LocationValue(super::LocationValue),
        #[prost(bool, tag = "10")]
        Invalid(bool),
        #[prost(message, tag = "21")]
        DoorValue(super::Doors),
        /// `WindowState` enum.
        #[prost(int32, tag = "24")]
        WindowStateValue(i32),
        /// `DetailedChargeStateValue` enum.
        #[prost(int32, tag = "32")]
        DetailedChargeStateValue(i32),
    }
}

/// `LocationValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LocationValue {
    #[prost(double, tag = "1")]
    pub latitude: f64,
    #[prost(double, tag = "2")]
    pub longitude: f64,
}

/// `Doors`: which doors are open.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Doors {
    #[prost(bool, tag = "1")]
    pub driver_front: bool,
    #[prost(bool, tag = "2")]
    pub driver_rear: bool,
    #[prost(bool, tag = "3")]
    pub passenger_front: bool,
    #[prost(bool, tag = "4")]
    pub passenger_rear: bool,
    #[prost(bool, tag = "5")]
    pub trunk_front: bool,
    #[prost(bool, tag = "6")]
    pub trunk_rear: bool,
}

/// `Field` enum numbers dq maps.
pub(crate) mod field {
    pub const VEHICLE_SPEED: i32 = 4;
    pub const ODOMETER: i32 = 5;
    pub const SOC: i32 = 8;
    pub const LOCATION: i32 = 21;
    pub const DC_CHARGING_ENERGY_IN: i32 = 34;
    pub const DC_CHARGING_POWER: i32 = 35;
    pub const AC_CHARGING_POWER: i32 = 37;
    pub const CHARGE_LIMIT_SOC: i32 = 38;
    pub const EST_BATTERY_RANGE: i32 = 40;
    pub const CHARGE_AMPS: i32 = 49;
    pub const DOOR_STATE: i32 = 58;
    pub const FD_WINDOW: i32 = 60;
    pub const FP_WINDOW: i32 = 61;
    pub const RD_WINDOW: i32 = 62;
    pub const RP_WINDOW: i32 = 63;
    pub const TPMS_PRESSURE_FL: i32 = 69;
    pub const TPMS_PRESSURE_FR: i32 = 70;
    pub const TPMS_PRESSURE_RL: i32 = 71;
    pub const TPMS_PRESSURE_RR: i32 = 72;
    pub const OUTSIDE_TEMP: i32 = 86;
    pub const ENERGY_REMAINING: i32 = 158;
    pub const DETAILED_CHARGE_STATE: i32 = 179;
    pub const CHARGER_VOLTAGE: i32 = 184;
}
