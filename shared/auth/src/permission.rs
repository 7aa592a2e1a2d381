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

/// The GraphQL `Privilege` enum, defined once beside the signal catalog that uses it.
pub use dq_signals::Privilege;

/// Each privilege maps to the permission string the directives check (gqlgen.yml).
impl From<Privilege> for Permission {
    fn from(p: Privilege) -> Self {
        match p {
            Privilege::VehicleNonLocationData => Permission::GetNonLocationHistory,
            Privilege::VehicleCommands => Permission::ExecuteCommands,
            Privilege::VehicleCurrentLocation => Permission::GetCurrentLocation,
            Privilege::VehicleAllTimeLocation => Permission::GetLocationHistory,
            Privilege::VehicleVinCredential => Permission::GetVinCredential,
            Privilege::VehicleApproximateLocation => Permission::GetApproximateLocation,
            Privilege::VehicleRawData => Permission::GetRawData,
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
            assert_eq!(Privilege::parse(p.as_str()), Some(p));
        }
        assert_eq!(Privilege::parse("vehicle_raw_data"), None);
        assert_eq!(
            Permission::from(Privilege::VehicleNonLocationData),
            Permission::GetNonLocationHistory
        );
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
