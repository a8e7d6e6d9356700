package aws

// builtinPricesDate is when the built-in price list was written.
const builtinPricesDate = "2026-11-29"

// builtinOnDemand is the price list compiled into the binary: the hourly
// On-Demand price in USD of common instance types (Linux, shared tenancy)
// by region, written by hand on builtinPricesDate from AWS's public
// On-Demand price pages (us-east-1 figures checked against a public
// summary of June 2026; the EU figures are less certain). It is the
// fallback when the Price List API is unreachable or refused, and for
// types the API did not list; prices of a region it lacks are unknown.
// us-east-2 and us-west-2 charge what us-east-1 does for these types.
var builtinOnDemand = func() map[string]map[string]float64 {
	useast := map[string]float64{
		"t3.medium": 0.0416, "t3.large": 0.0832, "t3.xlarge": 0.1664, "t3.2xlarge": 0.3328,
		"t3a.medium": 0.0376, "t3a.large": 0.0752, "t3a.xlarge": 0.1504,
		"m5.large": 0.096, "m5.xlarge": 0.192, "m5.2xlarge": 0.384, "m5.4xlarge": 0.768, "m5.8xlarge": 1.536,
		"m6i.large": 0.096, "m6i.xlarge": 0.192, "m6i.2xlarge": 0.384, "m6i.4xlarge": 0.768,
		"m7i.large": 0.1008, "m7i.xlarge": 0.2016, "m7i.2xlarge": 0.4032,
		"m6g.large": 0.077, "m6g.xlarge": 0.154, "m6g.2xlarge": 0.308,
		"m7g.large": 0.0816, "m7g.xlarge": 0.1632, "m7g.2xlarge": 0.3264,
		"c5.large": 0.085, "c5.xlarge": 0.17, "c5.2xlarge": 0.34, "c5.4xlarge": 0.68,
		"c6i.large": 0.085, "c6i.xlarge": 0.17, "c6i.2xlarge": 0.34,
		"c7i.large": 0.08925, "c7i.xlarge": 0.1785, "c7i.2xlarge": 0.357,
		"c6g.large": 0.068, "c6g.xlarge": 0.136, "c7g.large": 0.0725, "c7g.xlarge": 0.145,
		"r5.large": 0.126, "r5.xlarge": 0.252, "r5.2xlarge": 0.504,
		"r6i.large": 0.126, "r6i.xlarge": 0.252, "r6g.large": 0.1008, "r6g.xlarge": 0.2016,
		"g4dn.xlarge": 0.526, "g4dn.2xlarge": 0.752, "g5.xlarge": 1.006, "g5.2xlarge": 1.212,
		"p3.2xlarge": 3.06,
	}
	return map[string]map[string]float64{
		"us-east-1": useast,
		"us-east-2": useast,
		"us-west-2": useast,
		"eu-west-1": {
			"t3.medium": 0.0456, "t3.large": 0.0912, "t3.xlarge": 0.1824,
			"m5.large": 0.107, "m5.xlarge": 0.214, "m5.2xlarge": 0.428, "m5.4xlarge": 0.856,
			"m6i.large": 0.107, "m6i.xlarge": 0.214, "m6g.large": 0.086, "m6g.xlarge": 0.172,
			"c5.large": 0.096, "c5.xlarge": 0.192, "c5.2xlarge": 0.384,
			"c6i.large": 0.096, "c6i.xlarge": 0.192, "c6g.large": 0.0768,
			"r5.large": 0.141, "r5.xlarge": 0.282, "r6i.large": 0.141,
			"g4dn.xlarge": 0.587,
		},
		"eu-central-1": {
			"t3.medium": 0.048, "t3.large": 0.096, "t3.xlarge": 0.192,
			"m5.large": 0.115, "m5.xlarge": 0.23, "m5.2xlarge": 0.46, "m5.4xlarge": 0.92,
			"m6i.large": 0.115, "m6i.xlarge": 0.23, "m6g.large": 0.092, "m6g.xlarge": 0.184,
			"c5.large": 0.097, "c5.xlarge": 0.194, "c5.2xlarge": 0.388,
			"c6i.large": 0.097, "c6i.xlarge": 0.194, "c6g.large": 0.0776,
			"r5.large": 0.152, "r5.xlarge": 0.304, "r6i.large": 0.152,
			"g4dn.xlarge": 0.658,
		},
	}
}()
