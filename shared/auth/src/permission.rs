//! Permissions (the strings in a token's `permissions` claim) and the GraphQL `Privilege` enum
//! that names them.

use std::fmt;

/// One permission string a token-exchange token can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Permission {
    /// `privilege:GetNonLocationHistory`
    GetNonLocationHistory,
    /// `privilege:ExecuteCommands`
    ExecuteCommands,
    /// `privilege:GetCurrentLocation`
    GetCurrentLocation,
    /// `privilege:GetLocationHistory`
    GetLocationHistory,
    /// `privilege:GetVINCredential`
    GetVinCredential,
    /// `privilege:GetLiveData` (no GraphQL `Privilege` value maps to it)
    GetLiveData,
    /// `privilege:GetRawData`
    GetRawData,
    /// `privilege:GetApproximateLocation`
    GetApproximateLocation,
}

impl Permission {
    /// Every permission, in the order of the deprecated numeric `privilege_ids` (1–8).
    pub const ALL: [Permission; 8] = [
        Permission::GetNonLocationHistory,
        Permission::ExecuteCommands,
        Permission::GetCurrentLocation,
        Permission::GetLocationHistory,
        Permission::GetVinCredential,
        Permission::GetLiveData,
        Permission::GetRawData,
        Permission::GetApproximateLocation,
    ];

    /// The exact claim string, e.g. `privilege:GetNonLocationHistory`.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::GetNonLocationHistory => "privilege:GetNonLocationHistory",
            Permission::ExecuteCommands => "privilege:ExecuteCommands",
            Permission::GetCurrentLocation => "privilege:GetCurrentLocation",
            Permission::GetLocationHistory => "privilege:GetLocationHistory",
            Permission::GetVinCredential => "privilege:GetVINCredential",
            Permission::GetLiveData => "privilege:GetLiveData",
            Permission::GetRawData => "privilege:GetRawData",
            Permission::GetApproximateLocation => "privilege:GetApproximateLocation",
        }
    }

    /// Parses a claim string (exact, case-sensitive, like Go's `slices.Contains`).
    pub fn parse(s: &str) -> Option<Permission> {
        Permission::ALL.into_iter().find(|p| p.as_str() == s)
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of [`Permission`]s (a bit set; cheap to copy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PermissionSet(u16);

impl PermissionSet {
    /// The empty set.
    pub const EMPTY: PermissionSet = PermissionSet(0);

    /// Every permission (what a service principal holds).
    pub fn all() -> PermissionSet {
        Permission::ALL.into_iter().collect()
    }

    /// Builds the set from claim strings; unknown strings are ignored.
    pub fn from_claim_strings<I, S>(strings: I) -> PermissionSet
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        strings
            .into_iter()
            .filter_map(|s| Permission::parse(s.as_ref()))
            .collect()
    }

    /// True when `p` is in the set.
    pub fn contains(self, p: Permission) -> bool {
        self.0 & p.bit() != 0
    }

    /// Adds `p`.
    pub fn insert(&mut self, p: Permission) {
        self.0 |= p.bit();
    }

    /// True when the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The members, in [`Permission::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Permission> {
        Permission::ALL
            .into_iter()
            .filter(move |p| self.contains(*p))
    }

    /// Raw-data access (the cloud-event rule's second step): `GetRawData`, OR both
    /// `GetLocationHistory` and `GetNonLocationHistory`.
    pub fn has_raw_data_access(self) -> bool {
        self.contains(Permission::GetRawData)
            || (self.contains(Permission::GetLocationHistory)
                && self.contains(Permission::GetNonLocationHistory))
    }
}

impl FromIterator<Permission> for PermissionSet {
    fn from_iter<I: IntoIterator<Item = Permission>>(iter: I) -> Self {
        let mut set = PermissionSet::EMPTY;
        for p in iter {
            set.insert(p);
        }
        set
    }
}

/// The GraphQL `Privilege` enum, each value mapped to the permission string
/// the directives check (gqlgen.yml).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Privilege {
    /// `VEHICLE_NON_LOCATION_DATA` → `privilege:GetNonLocationHistory`
    VehicleNonLocationData,
    /// `VEHICLE_COMMANDS` → `privilege:ExecuteCommands`
    VehicleCommands,
    /// `VEHICLE_CURRENT_LOCATION` → `privilege:GetCurrentLocation`
    VehicleCurrentLocation,
    /// `VEHICLE_ALL_TIME_LOCATION` → `privilege:GetLocationHistory`
    VehicleAllTimeLocation,
    /// `VEHICLE_VIN_CREDENTIAL` → `privilege:GetVINCredential`
    VehicleVinCredential,
    /// `VEHICLE_APPROXIMATE_LOCATION` → `privilege:GetApproximateLocation`
    VehicleApproximateLocation,
    /// `VEHICLE_RAW_DATA` → `privilege:GetRawData`
    VehicleRawData,
}

impl Privilege {
    /// Every value, in SDL order.
    pub const ALL: [Privilege; 7] = [
        Privilege::VehicleNonLocationData,
        Privilege::VehicleCommands,
        Privilege::VehicleCurrentLocation,
        Privilege::VehicleAllTimeLocation,
        Privilege::VehicleVinCredential,
        Privilege::VehicleApproximateLocation,
        Privilege::VehicleRawData,
    ];

    /// The permission string the directives compare against.
    pub fn permission(self) -> Permission {
        match self {
            Privilege::VehicleNonLocationData => Permission::GetNonLocationHistory,
            Privilege::VehicleCommands => Permission::ExecuteCommands,
            Privilege::VehicleCurrentLocation => Permission::GetCurrentLocation,
            Privilege::VehicleAllTimeLocation => Permission::GetLocationHistory,
            Privilege::VehicleVinCredential => Permission::GetVinCredential,
            Privilege::VehicleApproximateLocation => Permission::GetApproximateLocation,
            Privilege::VehicleRawData => Permission::GetRawData,
        }
    }

    /// The SDL enum value, e.g. `VEHICLE_NON_LOCATION_DATA`.
    pub fn graphql_name(self) -> &'static str {
        match self {
            Privilege::VehicleNonLocationData => "VEHICLE_NON_LOCATION_DATA",
            Privilege::VehicleCommands => "VEHICLE_COMMANDS",
            Privilege::VehicleCurrentLocation => "VEHICLE_CURRENT_LOCATION",
            Privilege::VehicleAllTimeLocation => "VEHICLE_ALL_TIME_LOCATION",
            Privilege::VehicleVinCredential => "VEHICLE_VIN_CREDENTIAL",
            Privilege::VehicleApproximateLocation => "VEHICLE_APPROXIMATE_LOCATION",
            Privilege::VehicleRawData => "VEHICLE_RAW_DATA",
        }
    }

    /// Parses an SDL enum value.
    pub fn from_graphql_name(s: &str) -> Option<Privilege> {
        Privilege::ALL.into_iter().find(|p| p.graphql_name() == s)
    }
}

impl From<dq_signals::Privilege> for Privilege {
    fn from(p: dq_signals::Privilege) -> Self {
        match p {
            dq_signals::Privilege::VehicleNonLocationData => Privilege::VehicleNonLocationData,
            dq_signals::Privilege::VehicleCommands => Privilege::VehicleCommands,
            dq_signals::Privilege::VehicleCurrentLocation => Privilege::VehicleCurrentLocation,
            dq_signals::Privilege::VehicleAllTimeLocation => Privilege::VehicleAllTimeLocation,
            dq_signals::Privilege::VehicleVinCredential => Privilege::VehicleVinCredential,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_round_trip_and_are_case_sensitive() {
        for p in Permission::ALL {
            assert_eq!(Permission::parse(p.as_str()), Some(p));
        }
        assert_eq!(Permission::parse("privilege:getrawdata"), None);
        assert_eq!(Permission::parse("GetRawData"), None);
        for p in Privilege::ALL {
            assert_eq!(Privilege::from_graphql_name(p.graphql_name()), Some(p));
            assert_eq!(
                dq_signals::Privilege::VehicleNonLocationData.as_str(),
                Privilege::from(dq_signals::Privilege::VehicleNonLocationData).graphql_name()
            );
        }
    }

    #[test]
    fn raw_data_rule() {
        let set = |ps: &[Permission]| ps.iter().copied().collect::<PermissionSet>();
        assert!(set(&[Permission::GetRawData]).has_raw_data_access());
        assert!(set(&[
            Permission::GetLocationHistory,
            Permission::GetNonLocationHistory
        ])
        .has_raw_data_access());
        assert!(!set(&[Permission::GetLocationHistory]).has_raw_data_access());
        assert!(!set(&[Permission::GetNonLocationHistory]).has_raw_data_access());
        assert!(!PermissionSet::EMPTY.has_raw_data_access());
        assert_eq!(PermissionSet::all().iter().count(), 8);
    }
}
