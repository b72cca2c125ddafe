// hover_node: holds a FlightGoggles (AlphaPilot 2019) quadrotor at a position setpoint.
// In:  /tf (tf2_msgs/TFMessage; world -> uav/imu is the ground-truth pose), /uav/sensors/imu
//      (published only once armed). Out: /uav/input/rateThrust (mav_msgs/RateThrust: body FLU
//      rates in rad/s, thrust.z = collective thrust in N), one per pose, so one per tick of a
//      lock-step simulator. Cascade, world z up: position PD (+ I on z) -> desired acceleration
//      -> thrust and attitude (geometric attitude error, Lee et al. 2010) -> body rates, sent
//      with a proportional correction from the IMU's gyro: FlightGoggles' own rate loop is slow
//      (time constant ~0.14 s) next to the simulated moment noise, and this makes it ~6x faster.
// Private params: ~x ~y ~z (setpoint; default: the first pose plus ~dx ~dy ~dz), ~yaw (default:
// the first yaw), ~mass (default /uav/flightgoggles_uav_dynamics/vehicle_mass, else 1 kg),
// ~arm_thrust (N sent while disarmed: FlightGoggles arms at >= 9.9 N and publishes the IMU only
// while armed, so "armed" here is "an IMU message within the last 0.1 s"); gains ~kp ~kd ~ki
// ~katt ~krate (defaults below).
#include <mav_msgs/RateThrust.h>
#include <ros/ros.h>
#include <sensor_msgs/Imu.h>
#include <tf2_msgs/TFMessage.h>

#include <algorithm>
#include <array>
#include <cmath>

using V3 = std::array<double, 3>;
static V3 add(V3 a, V3 b) { return {a[0] + b[0], a[1] + b[1], a[2] + b[2]}; }
static V3 sub(V3 a, V3 b) { return {a[0] - b[0], a[1] - b[1], a[2] - b[2]}; }
static V3 mul(double k, V3 a) { return {k * a[0], k * a[1], k * a[2]}; }
static double dot(V3 a, V3 b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
static double norm(V3 a) { return std::sqrt(dot(a, a)); }
static V3 unit(V3 a) { return mul(1.0 / norm(a), a); }
static V3 cross(V3 a, V3 b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}

class Hover {
 public:
  explicit Hover(ros::NodeHandle& nh) : pnh_("~") {
    fixed_sp_ = pnh_.getParam("x", sp_[0]) & pnh_.getParam("y", sp_[1]) &
                pnh_.getParam("z", sp_[2]);
    have_yaw_ = pnh_.getParam("yaw", yaw_sp_);
    nh.param("/uav/flightgoggles_uav_dynamics/vehicle_mass", mass_, 1.0);
    pnh_.param("mass", mass_, mass_);
    pnh_.param("arm_thrust", arm_thrust_, 10.0);
    pnh_.param("kp", kp_, kp_), pnh_.param("kd", kd_, kd_), pnh_.param("ki", ki_, ki_);
    pnh_.param("katt", katt_, katt_), pnh_.param("krate", krate_, krate_);
    cmd_pub_ = nh.advertise<mav_msgs::RateThrust>("/uav/input/rateThrust", 1);
    auto hints = ros::TransportHints().tcpNoDelay();  // lock-step: latency is the tick rate
    tf_sub_ = nh.subscribe("/tf", 10, &Hover::onTf, this, hints);
    imu_sub_ = nh.subscribe("/uav/sensors/imu", 10, &Hover::onImu, this, hints);
  }

 private:
  void onImu(const sensor_msgs::Imu& m) {
    t_imu_ = m.header.stamp.toSec();
    gyro_ = {m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z};
  }

  void onTf(const tf2_msgs::TFMessage& msg) {
    for (const auto& ts : msg.transforms)
      if (ts.child_frame_id == "uav/imu" || ts.child_frame_id == "/uav/imu") step(ts);
  }

  void step(const geometry_msgs::TransformStamped& ts) {
    const auto& tr = ts.transform.translation;
    const auto& q = ts.transform.rotation;
    const V3 p{tr.x, tr.y, tr.z};
    const double w = q.w, x = q.x, y = q.y, z = q.z;
    // Rotation body -> world as its columns: the body axes in world coordinates.
    const V3 bx{1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)};
    const V3 by{2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)};
    const V3 bz{2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)};
    const double t = ts.header.stamp.toSec();
    if (!have_prev_) {  // the first pose: the start (a disarmed vehicle does not move)
      if (!fixed_sp_)
        sp_ = add(p, V3{pnh_.param("dx", 0.0), pnh_.param("dy", 0.0), pnh_.param("dz", 0.0)});
      if (!have_yaw_) yaw_sp_ = std::atan2(bx[1], bx[0]);
      ROS_INFO("setpoint (%.3f %.3f %.3f) yaw %.3f, mass %.3f kg", sp_[0], sp_[1], sp_[2],
               yaw_sp_, mass_);
    }
    double dt = 0.0;
    if (have_prev_) {
      dt = t - t_prev_;
      if (dt > 0.0) vel_ = mul(1.0 / dt, sub(p, p_prev_));  // ground truth: no noise to filter
    }
    p_prev_ = p, t_prev_ = t, have_prev_ = true;
    const bool armed = t_imu_ >= 0.0 && t - t_imu_ < 0.1;

    // Position loop (world frame): PD -> desired acceleration, plus an integral on z for a
    // thrust or mass offset, only near the setpoint (no wind-up while flying there).
    const V3 err = sub(sp_, p);
    if (armed && dt > 0.0 && dt < 0.1 && std::abs(err[2]) < kIZone)
      integ_z_ = std::clamp(integ_z_ + dt * err[2], -1.0, 1.0);
    V3 acc = add(mul(kp_, err), mul(-kd_, vel_));
    acc[2] = std::max(acc[2] + ki_ * integ_z_ + kG, 0.2 * kG);  // never fall faster than 0.8 g
    const double horiz = std::hypot(acc[0], acc[1]), max_horiz = acc[2] * std::tan(kMaxTilt);
    if (horiz > max_horiz) acc[0] *= max_horiz / horiz, acc[1] *= max_horiz / horiz;

    // Attitude: body z along acc, heading yaw_sp_; error e = 0.5 vee(Rd^T R - R^T Rd).
    const V3 zd = unit(acc);
    const V3 yd = unit(cross(zd, V3{std::cos(yaw_sp_), std::sin(yaw_sp_), 0.0}));
    const V3 xd = cross(yd, zd);
    const V3 e{0.5 * (dot(zd, by) - dot(yd, bz)), 0.5 * (dot(xd, bz) - dot(zd, bx)),
               0.5 * (dot(yd, bx) - dot(xd, by))};

    mav_msgs::RateThrust cmd;
    cmd.header.stamp = ts.header.stamp;
    cmd.header.frame_id = "uav/imu";
    const V3 rate{-katt_ * e[0], -katt_ * e[1], -kYaw * e[2]};
    const V3 boost = mul(krate_, sub(rate, gyro_));
    cmd.angular_rates.x = armed ? rate[0] + boost[0] : 0.0;
    cmd.angular_rates.y = armed ? rate[1] + boost[1] : 0.0;
    cmd.angular_rates.z = armed ? rate[2] + boost[2] : 0.0;
    cmd.thrust.z = armed ? mass_ * dot(acc, bz) : std::max(mass_ * kG, arm_thrust_);
    cmd_pub_.publish(cmd);
    ROS_INFO_THROTTLE(1.0, "t=%.2f pos=(%.3f %.3f %.3f) err=%.4f m |gyro|=%.3f rad/s%s", t, p[0],
                      p[1], p[2], norm(err), norm(gyro_), armed ? "" : " (arming)");
  }

  // Position loop ~3.2 rad/s (damping ratio 1.1), attitude 15 rad/s, rate P gain x (1 + 5).
  double kp_ = 10.0, kd_ = 7.0, ki_ = 4.0, katt_ = 15.0, krate_ = 5.0;
  static constexpr double kIZone = 0.25, kYaw = 3.0, kG = 9.81, kMaxTilt = 0.6;

  ros::NodeHandle pnh_;
  ros::Publisher cmd_pub_;
  ros::Subscriber tf_sub_, imu_sub_;
  V3 sp_{}, p_prev_{}, vel_{}, gyro_{};
  double integ_z_ = 0.0, yaw_sp_ = 0.0, mass_ = 1.0, arm_thrust_ = 10.0;
  double t_prev_ = 0.0, t_imu_ = -1.0;
  bool fixed_sp_ = false, have_yaw_ = false, have_prev_ = false;
};

int main(int argc, char** argv) {
  ros::init(argc, argv, "hover_cpp");
  ros::NodeHandle nh;
  Hover hover(nh);
  ros::spin();
  return 0;
}
